// The console's one door to bay: every call goes through the public API v1 with the API key
// of this browser tab (sessionStorage: gone when the tab closes, never in a URL or a cookie).

const KEY = 'shipyard.apiKey';

export function apiKey() { return sessionStorage.getItem(KEY) || ''; }
export function setAPIKey(k) { sessionStorage.setItem(KEY, k); }
export function clearAPIKey() { sessionStorage.removeItem(KEY); }

// APIError carries bay's error envelope: status, code, message and request id.
export class APIError extends Error {
  constructor(status, code, message, requestId) {
    super(message || ('HTTP ' + status));
    this.status = status;
    this.code = code || '';
    this.requestId = requestId || '';
  }
  // missing is true for an endpoint this bay does not offer (or an object that is gone).
  get missing() { return this.status === 404; }
}

let onUnauthorized = () => {};
export function setUnauthorizedHandler(f) { onUnauthorized = f; }

function headers(extra) {
  const h = Object.assign({}, extra);
  const k = apiKey();
  if (k) h.Authorization = 'Bearer ' + k;
  return h;
}

export function sandboxPath(id, rest) {
  return '/v1/sandboxes/' + encodeURIComponent(id) + (rest || '');
}

export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  }
  const s = u.toString();
  return s ? '?' + s : '';
}

async function errorOf(resp) {
  let code = '', msg = '', rid = resp.headers.get('X-Request-Id') || '';
  try {
    const body = await resp.json();
    if (body && body.error) {
      code = body.error.code; msg = body.error.message; rid = body.error.request_id || rid;
    }
  } catch (_) { /* not JSON */ }
  return new APIError(resp.status, code, msg || resp.statusText, rid);
}

// call sends one request and decodes the JSON answer (null for 204). opts.idempotent adds an
// Idempotency-Key; opts.probe keeps a 401 from signing the console out (the sign-in check).
// A GET is given up after GET_TIMEOUT_MS: the pages' polling chains wait for each answer
// before they schedule the next, so one request that never ends (a connection lost without
// a reset) would otherwise stop a page's refresh for good. Other methods wait as long as bay
// takes (a create or an execution may take minutes).
const GET_TIMEOUT_MS = 30000;

export async function call(method, path, body, opts) {
  const init = { method, headers: headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}), cache: 'no-store' };
  if (method === 'GET') init.signal = AbortSignal.timeout(GET_TIMEOUT_MS);
  if (body !== undefined) init.body = JSON.stringify(body);
  if (opts && opts.idempotent) init.headers['Idempotency-Key'] = crypto.randomUUID();
  const resp = await fetch(path, init);
  if (!resp.ok) {
    const err = await errorOf(resp);
    if (resp.status === 401 && !(opts && opts.probe)) onUnauthorized(err);
    throw err;
  }
  if (resp.status === 204) return null;
  const ct = resp.headers.get('Content-Type') || '';
  return ct.includes('json') ? resp.json() : resp.text();
}

export const get = (path) => call('GET', path);

// blob downloads path (a file of a workspace) as a Blob.
export async function blob(path) {
  const resp = await fetch(path, { headers: headers({}), cache: 'no-store' });
  if (!resp.ok) {
    const err = await errorOf(resp);
    if (resp.status === 401) onUnauthorized(err);
    throw err;
  }
  return resp.blob();
}

// saveBlob downloads path and hands it to the browser as a file named name.
export async function saveBlob(path, name) {
  const url = URL.createObjectURL(await blob(path));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// upload sends file as multipart/form-data, the fields first (bay reads the path field before
// the file part), and reports progress as a fraction; it resolves with bay's answer.
export function upload(path, fields, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    const k = apiKey();
    if (k) xhr.setRequestHeader('Authorization', 'Bearer ' + k);
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) onProgress(e.loaded / e.total); };
    xhr.onerror = () => reject(new APIError(0, 'network', 'Upload failed: network error'));
    xhr.onload = () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (_) { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) { onProgress(1); resolve(body); return; }
      const e = body && body.error ? body.error : {};
      const err = new APIError(xhr.status, e.code, e.message || xhr.statusText, e.request_id);
      if (xhr.status === 401) onUnauthorized(err);
      reject(err);
    };
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    form.append('file', file, file.name);
    xhr.send(form);
  });
}

// terminalSocket opens the terminal WebSocket of a sandbox. The key travels as a subprotocol
// (a browser cannot set headers on a WebSocket), base64url-encoded; bay answers with the
// terminal's own subprotocol and never echoes the key.
export function terminalSocket(id, cols, rows) {
  const enc = btoa(String.fromCharCode(...new TextEncoder().encode(apiKey())))
    .replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = scheme + '//' + location.host + sandboxPath(id, '/terminal') + qs({ cols, rows });
  return new WebSocket(url, ['shipyard.terminal.v1', 'shipyard.bearer.' + enc]);
}

// events reads a text/event-stream answer of path with fetch, since an EventSource cannot send
// the Authorization header and the key must never travel in a URL. It calls onEvent(type, data,
// id) for every event and resolves with the id of the last one when the server ends the stream.
// lastId resumes a stream (Last-Event-ID); signal aborts it.
export async function events(path, lastId, onEvent, signal) {
  const extra = { Accept: 'text/event-stream' };
  if (lastId) extra['Last-Event-ID'] = lastId;
  const resp = await fetch(path, { headers: headers(extra), cache: 'no-store', signal });
  if (!resp.ok) {
    const err = await errorOf(resp);
    if (resp.status === 401) onUnauthorized(err);
    throw err;
  }
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '', type = '', data = [], id = lastId || '';
  // One line of the stream, as the HTML standard's event-stream interpretation reads it.
  const line = (l) => {
    if (l === '') {
      if (data.length) onEvent(type || 'message', data.join('\n'), id);
      type = ''; data = [];
      return;
    }
    if (l[0] === ':') return; // a comment (keep-alive)
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id' && !value.includes('\0')) id = value;
  };
  for (;;) {
    const { value, done } = await reader.read();
    buf += dec.decode(value || new Uint8Array(), { stream: !done });
    let m;
    while ((m = /\r\n|\r|\n/.exec(buf)) !== null) {
      // A lone \r at the end of the buffer may be the first half of \r\n: wait for more.
      if (m[0] === '\r' && m.index === buf.length - 1 && !done) break;
      line(buf.slice(0, m.index));
      buf = buf.slice(m.index + m[0].length);
    }
    if (done) return id;
  }
}
