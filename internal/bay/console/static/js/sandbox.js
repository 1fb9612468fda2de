// One sandbox: overview (containers, versions, health), terminal, files, execution history
// and the pages of features a bay may not have yet (metrics, jobs, network policy).
import { call, get, blob, upload, saveBlob, qs, sandboxPath, terminalSocket, events } from './api.js';
import { h, clear, fill, badge, fmtIn, fmtTime, fmtBytes, notify, showError, errText, confirmButton, busy, table, unavailable, generic } from './ui.js';
import { Terminal } from './term.js';

const TABS = [['overview', 'Overview'], ['terminal', 'Terminal'], ['files', 'Files'], ['history', 'History'],
  ['jobs', 'Jobs'], ['browser', 'Browser'], ['metrics', 'Usage'], ['network', 'Network']];

export function sandboxPage(main, id, tab) {
  document.title = id + ' · Shipyard console';
  let alive = true, timer = 0, sub = null;
  const head = h('div', { class: 'page-head' });
  const body = h('section', { id: 'tab-' + tab, class: 'tab-body', 'aria-labelledby': 'tablink-' + tab });
  const tabs = h('nav', { class: 'tabs', 'aria-label': 'Sandbox sections' }, TABS.map(([k, label]) =>
    h('a', { id: 'tablink-' + k, href: '#/sandboxes/' + encodeURIComponent(id) + '/' + k, 'aria-current': k === tab ? 'page' : null,
      hidden: k === 'browser' && tab !== 'browser' }, label)));
  main.append(h('p', { class: 'crumbs' }, h('a', { href: '#/sandboxes' }, 'Sandboxes'), ' / ', h('span', { class: 'mono' }, id)), head, tabs, body);

  let sb = null;
  async function poll() {
    clearTimeout(timer);
    try {
      sb = await get(sandboxPath(id));
      if (!alive) return;
      drawHead();
      if (tab === 'overview') drawOverview(body, sb);
    } catch (e) {
      if (!alive) return;
      if (e.status === 404) { fill(head, h('h1', {}, 'Sandbox not found')); fill(body, h('p', {}, 'There is no sandbox ' + id + ' (or it was deleted).')); return; }
      showError(e);
    }
    if (alive) timer = setTimeout(poll, document.hidden ? 20000 : 5000); // a ready sandbox's GET asks its runtimes
  }

  function drawHead() {
    // The browser tab is for sandboxes with a browser runtime (gull).
    tabs.querySelector('#tablink-browser').hidden = !(sb.capabilities || []).includes('browser');
    fill(head, 
      h('h1', { class: 'mono' }, sb.id), badge(sb.status),
      h('span', { class: 'muted' }, sb.profile + ' · expires ' + fmtIn(sb.expires_at)),
      h('div', { class: 'actions' },
        h('button', { type: 'button', disabled: !(sb.status === 'ready' || sb.status === 'starting'), onclick: (e) => busy(e.currentTarget, async () => { await call('POST', sandboxPath(id, '/stop')); notify('Stopped', 'ok'); poll(); }) }, 'Stop'),
        h('button', { type: 'button', disabled: !sb.expires_at || sb.status === 'expired', 'aria-label': 'Extend TTL by one hour', onclick: (e) => busy(e.currentTarget, async () => { await call('POST', sandboxPath(id, '/extend_ttl'), { extend_by: 3600 }, { idempotent: true }); notify('Extended by 1 h', 'ok'); poll(); }) }, '+1 h'),
        h('button', { type: 'button', disabled: sb.status === 'expired', onclick: (e) => busy(e.currentTarget, async () => { await call('POST', sandboxPath(id, '/keepalive')); notify('Idle deadline refreshed', 'ok'); poll(); }) }, 'Keep alive'),
        confirmButton('Delete', 'Really delete?', async () => { await call('DELETE', sandboxPath(id)); notify('Deleted ' + id, 'ok'); location.hash = '#/sandboxes'; }, { class: 'danger', 'aria-label': 'Delete sandbox' })));
  }

  poll();
  switch (tab) {
    case 'terminal': sub = terminalTab(body, id, () => poll()); break;
    case 'files': sub = filesTab(body, id); break;
    case 'history': sub = historyTab(body, id); break;
    case 'jobs': sub = jobsTab(body, id); break;
    case 'browser': sub = browserTab(body, id); break;
    case 'metrics': sub = metricsTab(body, id); break;
    case 'network': networkTab(body, id); break;
  }
  return () => { alive = false; clearTimeout(timer); if (sub) sub(); };
}

function drawOverview(body, sb) {
  const dl = (pairs) => h('dl', { class: 'facts' }, pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  const containers = sb.containers || [];
  fill(body, 
    dl([['Status', badge(sb.status)], ['Profile', sb.profile], ['Cargo', h('span', { class: 'mono' }, sb.cargo_id)],
      ['Capabilities', sb.capabilities.join(', ')], ['Created', fmtTime(sb.created_at)],
      ['Expires', sb.expires_at ? fmtTime(sb.expires_at) + ' (' + fmtIn(sb.expires_at) + ')' : 'never'],
      ['Idle stop', sb.idle_expires_at ? fmtTime(sb.idle_expires_at) + ' (' + fmtIn(sb.idle_expires_at) + ')' : '—']]),
    h('h2', {}, 'Containers'),
    containers.length ? table('Containers', ['Name', 'Runtime', 'Status', 'Version', 'Health', 'Capabilities'], containers.map((c) => [
      c.name, c.runtime_type, badge(c.status), c.version || '—',
      c.healthy === null || c.healthy === undefined ? '—' : h('span', { class: c.healthy ? 'ok-text' : 'error-text' }, c.healthy ? 'healthy' : 'unhealthy'),
      (c.capabilities || []).join(', ')]))
      : h('p', { class: 'empty' }, 'No running containers: compute starts with the first call (open the terminal or run something).'));
}

// ---- terminal ----

// terminalTab opens the sandbox's terminal; onOpen runs once it is connected (the sandbox has
// started by then).
function terminalTab(body, id, onOpen) {
  const state = h('span', { class: 'muted', role: 'status' }, 'connecting…');
  const box = h('div', { id: 'terminal', class: 'term-box' });
  const reconnect = h('button', { type: 'button', hidden: true, onclick: () => open() }, 'Reconnect');
  body.append(h('div', { class: 'term-bar' }, h('h2', {}, 'Terminal'), state, reconnect), box);
  let ws = null, closed = false;
  const term = new Terminal(box, {
    label: 'Terminal input',
    onData: (d) => { if (ws && ws.readyState === 1) ws.send(new TextEncoder().encode(d)); },
    onResize: (cols, rows) => {
      if (ws && ws.readyState === 1) { ws.send(JSON.stringify({ type: 'resize', cols, rows })); state.textContent = 'connected · ' + cols + '×' + rows; }
    },
  });
  function open() {
    reconnect.hidden = true;
    state.textContent = 'connecting… (starting the sandbox if needed)';
    ws = terminalSocket(id, term.cols, term.rows);
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => { state.textContent = 'connected · ' + term.cols + '×' + term.rows; term.focus(); onOpen(); };
    ws.onmessage = (e) => term.write(typeof e.data === 'string' ? e.data : new Uint8Array(e.data));
    ws.onclose = (e) => {
      if (closed) return;
      state.textContent = 'disconnected' + (e.code && e.code !== 1000 && e.code !== 1005 ? ' (' + e.code + (e.reason ? ': ' + e.reason : '') + ')' : '');
      reconnect.hidden = false;
    };
  }
  open();
  window.__shipyardTerminal = term; // read back by people debugging, and by the browser tests
  return () => { closed = true; if (ws) ws.close(1000); term.dispose(); delete window.__shipyardTerminal; };
}

// ---- files ----

const IMAGE = /\.(png|jpe?g|gif|webp|svg|bmp|ico)$/i;

function filesTab(body, id) {
  let dir = '.', objectURL = '';
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Directory' });
  const listing = h('div', { id: 'file-list' });
  const viewer = h('div', { id: 'file-view', class: 'viewer', 'aria-live': 'polite' });
  const fileInput = h('input', { id: 'upload-file', type: 'file', multiple: true });
  const progress = h('progress', { id: 'upload-progress', max: 1, value: 0, hidden: true, 'aria-label': 'Upload progress' });
  const upMsg = h('span', { class: 'muted small', role: 'status' });
  const upBtn = h('button', { type: 'submit' }, 'Upload');
  const uploader = h('form', {
    class: 'row-form', 'aria-label': 'Upload files',
    onsubmit: (e) => {
      e.preventDefault();
      busy(upBtn, async () => {
        for (const f of fileInput.files) {
          const target = dir === '.' ? f.name : dir + '/' + f.name;
          progress.hidden = false; progress.value = 0;
          upMsg.textContent = 'uploading ' + f.name + '…';
          const r = await upload(sandboxPath(id, '/filesystem/upload'), { path: target }, f, (p) => { progress.value = p; });
          upMsg.textContent = 'uploaded ' + r.path + ' (' + fmtBytes(r.size) + ')';
        }
        fileInput.value = '';
        await list();
      });
    },
  }, h('label', { for: 'upload-file' }, 'Upload to this directory'), fileInput, upBtn, progress, upMsg);
  body.append(h('h2', {}, 'Files'), crumbs, uploader, h('div', { class: 'split' }, listing, viewer));

  function go(d) { dir = d; list(); }

  async function list() {
    clear(crumbs);
    const parts = dir === '.' ? [] : dir.split('/');
    crumbs.append(h('a', { href: '#', onclick: (e) => { e.preventDefault(); go('.'); } }, 'workspace'));
    parts.forEach((p, i) => crumbs.append(' / ', h('a', { href: '#', onclick: (e) => { e.preventDefault(); go(parts.slice(0, i + 1).join('/')); } }, p)));
    fill(listing, h('p', { class: 'muted' }, 'loading…'));
    try {
      const r = await get(sandboxPath(id, '/filesystem/directories') + qs({ path: dir }));
      const entries = r.entries.slice().sort((a, b) => (b.is_dir - a.is_dir) || a.name.localeCompare(b.name));
      const rel = (e) => (dir === '.' ? e.name : dir + '/' + e.name);
      fill(listing, table('Files in ' + dir, ['Name', 'Size', 'Modified', 'Actions'], entries.map((e) => [
        e.is_dir
          ? h('a', { href: '#', class: 'dir', onclick: (ev) => { ev.preventDefault(); go(rel(e)); } }, e.name + '/')
          : h('a', { href: '#', onclick: (ev) => { ev.preventDefault(); view(rel(e)); } }, e.name),
        e.is_dir ? '—' : fmtBytes(e.size),
        e.modified_time ? new Date(e.modified_time * 1000).toLocaleString() : '—',
        h('div', { class: 'actions' },
          e.is_dir ? null : h('button', { type: 'button', 'aria-label': 'Download ' + e.name, onclick: (ev) => busy(ev.currentTarget, () => saveBlob(sandboxPath(id, '/filesystem/download') + qs({ path: rel(e) }), e.name)) }, 'Download'),
          confirmButton('Delete', 'Really?', async () => { await call('DELETE', sandboxPath(id, '/filesystem/files') + qs({ path: rel(e) })); notify('Deleted ' + rel(e), 'ok'); list(); },
            { class: 'danger', 'aria-label': 'Delete ' + e.name })),
      ]), 'This directory is empty.'));
    } catch (e) {
      fill(listing, h('p', { class: 'error-text' }, errText(e)));
    }
  }

  async function view(path) {
    if (objectURL) { URL.revokeObjectURL(objectURL); objectURL = ''; }
    fill(viewer, h('p', { class: 'muted' }, 'loading ' + path + '…'));
    try {
      if (IMAGE.test(path)) {
        const b = await blob(sandboxPath(id, '/filesystem/download') + qs({ path }));
        objectURL = URL.createObjectURL(b);
        fill(viewer, h('h3', { class: 'mono' }, path), h('img', { src: objectURL, alt: 'Image ' + path, class: 'preview' }));
        return;
      }
      const r = await get(sandboxPath(id, '/filesystem/files') + qs({ path }));
      fill(viewer, h('h3', { class: 'mono' }, path), h('pre', { class: 'file-text', tabIndex: 0, 'aria-label': 'Content of ' + path }, r.content));
    } catch (e) {
      fill(viewer, h('h3', { class: 'mono' }, path), h('p', { class: 'error-text' }, errText(e)),
        h('p', { class: 'muted' }, 'Binary files can be downloaded instead.'));
    }
  }

  list();
  return () => { if (objectURL) URL.revokeObjectURL(objectURL); };
}

// ---- history, with a runner whose result shows images as images ----

function outputBlock(text, isError) {
  if (!text) return null;
  return h('pre', { class: isError ? 'out err' : 'out', tabIndex: 0 }, stripANSI(text));
}

// stripANSI removes colour codes (IPython's tracebacks carry them) so tracebacks read cleanly.
function stripANSI(s) { return String(s).replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, ''); }

function images(list) {
  return (list || []).flatMap((m) => Object.entries(m).filter(([t]) => /^image\/(png|jpeg|gif|webp)$/.test(t))
    .map(([t, b64]) => h('img', { class: 'plot', src: 'data:' + t + ';base64,' + b64, alt: 'Image output (' + t + ')' })));
}

function historyTab(body, id) {
  let alive = true;
  const kind = h('select', { id: 'run-kind' }, h('option', { value: 'python' }, 'Python'), h('option', { value: 'shell' }, 'Shell'));
  const code = h('textarea', { id: 'run-code', rows: 4, spellcheck: false, placeholder: 'print("hello")' });
  const runBtn = h('button', { type: 'submit', class: 'primary' }, 'Run');
  const result = h('div', { id: 'run-result', 'aria-live': 'polite' });
  const filter = h('select', { id: 'h-type', onchange: () => load() }, ['', 'python', 'shell', 'browser', 'browser_batch'].map((t) => h('option', { value: t }, t || 'all types')));
  const okOnly = h('input', { id: 'h-ok', type: 'checkbox', onchange: () => load() });
  const list = h('div', { id: 'history-list' });
  body.append(
    h('form', {
      class: 'card row-form', 'aria-label': 'Run code',
      onsubmit: (e) => {
        e.preventDefault();
        busy(runBtn, async () => {
          fill(result, h('p', { class: 'muted' }, 'running…'));
          const isPy = kind.value === 'python';
          const r = await call('POST', sandboxPath(id, isPy ? '/python/exec' : '/shell/exec'), isPy ? { code: code.value } : { command: code.value });
          fill(result, h('p', {}, r.success ? h('span', { class: 'ok-text' }, 'success') : h('span', { class: 'error-text' }, 'failed'),
            ' · ' + r.execution_time_ms + ' ms' + (r.exit_code !== undefined ? ' · exit ' + r.exit_code : '') + ' · ', h('span', { class: 'mono' }, r.execution_id)),
          r.notice || r.kernel_notice ? h('p', { class: 'muted' }, r.notice || r.kernel_notice) : null,
          outputBlock(r.output), isPy ? images(r.data && r.data.output && r.data.output.images) : null, outputBlock(r.error, true));
          load();
        });
      },
    }, h('h2', {}, 'Run'),
    h('div', { class: 'field' }, h('label', { for: 'run-kind' }, 'Kind'), kind),
    h('div', { class: 'field full' }, h('label', { for: 'run-code' }, 'Code or command'), code), runBtn, h('div', { class: 'full' }, result)),
    h('div', { class: 'filters', role: 'search', 'aria-label': 'Filter history' },
      h('h2', {}, 'Execution history'),
      h('div', { class: 'field' }, h('label', { for: 'h-type' }, 'Type'), filter),
      h('div', { class: 'field check' }, okOnly, h('label', { for: 'h-ok' }, 'successful only'))),
    list);

  async function load() {
    try {
      const r = await get(sandboxPath(id, '/history') + qs({ exec_type: filter.value, success_only: okOnly.checked ? 'true' : '', limit: 100 }));
      if (!alive) return;
      fill(list, h('p', { class: 'muted' }, r.total + ' executions'));
      if (!r.entries.length) list.append(h('p', { class: 'empty' }, 'No executions yet.'));
      for (const e of r.entries) list.append(entry(e));
    } catch (e) { if (alive) fill(list, h('p', { class: 'error-text' }, errText(e))); }
  }

  // entry is one execution; its images (a page of the history lists their count only) are
  // fetched the first time it is opened.
  function entry(e) {
    const pics = h('div', { class: 'hist-images' });
    let fetched = false;
    return h('details', {
      class: 'hist ' + (e.success ? 'ok' : 'bad'),
      ontoggle: async (ev) => {
        if (!ev.currentTarget.open || fetched || !e.image_count) return;
        fetched = true;
        fill(pics, h('p', { class: 'muted' }, 'loading ' + e.image_count + ' image(s)…'));
        try {
          const full = await get(sandboxPath(id, '/history/' + encodeURIComponent(e.id)));
          fill(pics, h('h4', {}, 'Images'), images(full.images));
        } catch (err) { fetched = false; fill(pics, h('p', { class: 'error-text' }, errText(err))); }
      },
    },
      h('summary', {}, badge(e.success ? 'success' : 'failed'), ' ', h('strong', {}, e.exec_type), ' ',
        h('code', {}, firstLine(e.code)), ' ', h('span', { class: 'muted small' }, fmtTime(e.created_at) + ' · ' + e.execution_time_ms + ' ms' +
          (e.image_count ? ' · ' + e.image_count + ' image' + (e.image_count > 1 ? 's' : '') : ''))),
      h('p', { class: 'muted small mono' }, e.id + (e.tags ? ' · tags: ' + e.tags : '') + (e.description ? ' · ' + e.description : '')),
      h('h4', {}, 'Code'), h('pre', { class: 'code', tabIndex: 0 }, e.code),
      e.output ? [h('h4', {}, 'Output'), outputBlock(e.output)] : null,
      pics,
      e.error ? [h('h4', {}, 'Error'), outputBlock(e.error, true)] : null,
      e.notes ? [h('h4', {}, 'Notes'), h('p', {}, e.notes)] : null);
  }
  load();
  return () => { alive = false; };
}

function firstLine(s) { const l = String(s || '').split('\n')[0]; return l.length > 80 ? l.slice(0, 80) + '…' : l; }

// ---- features that land later: they answer 404 until then ----

async function optionalTab(body, title, path) {
  body.append(h('h2', {}, title));
  const box = h('div', {}, h('p', { class: 'muted' }, 'loading…'));
  body.append(box);
  try {
    fill(box, generic(title, await get(path)));
  } catch (e) {
    fill(box, e.status === 404 ? unavailable(title, path) : h('p', { class: 'error-text' }, errText(e)));
  }
}

// jobsTab lists the sandbox's jobs, starts one, and follows a job's output live.
function jobsTab(body, id) {
  const base = sandboxPath(id, '/jobs');
  let alive = true, listTimer = 0, stream = null;
  const list = h('div', { id: 'job-list' }, h('p', { class: 'muted' }, 'loading…'));
  const out = h('div', { id: 'job-output', 'aria-live': 'polite' });
  const kind = h('select', { id: 'job-kind' }, h('option', { value: 'shell' }, 'Shell'), h('option', { value: 'python' }, 'Python'));
  const cmd = h('textarea', { id: 'job-command', rows: 2, spellcheck: false, placeholder: 'for i in $(seq 5); do echo $i; sleep 1; done' });
  const start = h('button', { type: 'submit', class: 'primary' }, 'Start job');
  const form = h('form', {
    class: 'card row-form', 'aria-label': 'Start a job', hidden: true,
    onsubmit: (e) => {
      e.preventDefault();
      busy(start, async () => {
        const req = kind.value === 'python' ? { kind: 'python', code: cmd.value } : { kind: 'shell', command: cmd.value };
        const j = await call('POST', base, req, { idempotent: true });
        notify('Started ' + j.job_id, 'ok');
        follow(j.job_id);
        load();
      });
    },
  }, h('h2', {}, 'New job'), h('div', { class: 'field' }, h('label', { for: 'job-kind' }, 'Kind'), kind),
  h('div', { class: 'field full' }, h('label', { for: 'job-command' }, 'Command or code'), cmd), start);
  body.append(form, h('h2', {}, 'Jobs'), list, out);

  async function load() {
    clearTimeout(listTimer);
    try {
      const r = await get(base + '?limit=100');
      if (!alive) return;
      form.hidden = false;
      fill(list, table('Jobs', ['Job', 'Status', 'Kind', 'Command', 'Started', 'Exit', ''], (r.items || []).map((j) => [
        h('a', { href: '#', class: 'mono', onclick: (e) => { e.preventDefault(); follow(j.job_id); } }, j.job_id),
        badge(j.status), j.kind, h('code', {}, firstLine(j.command)), fmtTime(j.started_at),
        j.exit_code === null || j.exit_code === undefined ? '—' : String(j.exit_code),
        j.status === 'running' ? h('button', { type: 'button', 'aria-label': 'Cancel ' + j.job_id, onclick: (e) => busy(e.currentTarget, async () => { await call('POST', base + '/' + encodeURIComponent(j.job_id) + '/cancel'); load(); }) }, 'Cancel') : '',
      ]), 'No jobs yet.'));
      listTimer = setTimeout(load, 5000);
    } catch (e) {
      if (!alive) return;
      fill(list, e.status === 404 ? unavailable('Jobs', base) : h('p', { class: 'error-text' }, errText(e)));
    }
  }

  // follow shows a job's output live from its Server-Sent Events, read with fetch (the key
  // goes in the Authorization header, never in the URL). A dropped stream is resumed from the
  // last event's id (Last-Event-ID), so nothing is shown twice or lost.
  function follow(jobId) {
    if (stream) stream.abort();
    const ctl = new AbortController();
    stream = ctl;
    const stdout = h('pre', { class: 'out', tabIndex: 0, 'aria-label': 'Standard output of ' + jobId });
    const stderr = h('pre', { class: 'out err', tabIndex: 0, 'aria-label': 'Standard error of ' + jobId, hidden: true });
    const state = h('p', { class: 'muted', id: 'job-state' }, 'following…');
    fill(out, h('h3', {}, 'Output of ', h('span', { class: 'mono' }, jobId)), state, stdout, stderr);
    const path = base + '/' + encodeURIComponent(jobId) + '/output?follow=true';
    const show = (j) => state.replaceChildren(badge(j.status), j.exit_code !== null && j.exit_code !== undefined ? ' exit ' + j.exit_code : '', j.reason ? ' · ' + j.reason : '');
    let lastId = '', ended = false, failures = 0;
    const onEvent = (type, data, id) => {
      if (ctl.signal.aborted) return;
      lastId = id;
      const v = JSON.parse(data);
      if (type === 'stdout') stdout.append(v.data);
      else if (type === 'stderr') { stderr.hidden = false; stderr.append(stripANSI(v.data)); }
      else if (type === 'end') {
        ended = true;
        show(v);
        if (v.created_artifacts && v.created_artifacts.length) {
          out.append(h('h4', {}, 'Created files'), table('Created files', ['Path', 'Size', 'Change'], v.created_artifacts.map((a) => [h('span', { class: 'mono' }, a.path), fmtBytes(a.size), a.change])));
        }
        load();
      }
    };
    (async () => {
      state.replaceChildren(badge('running'), ' live');
      while (!ended && !ctl.signal.aborted) {
        try {
          await events(path, lastId, onEvent, ctl.signal);
          failures = 0;
        } catch (e) {
          if (ctl.signal.aborted) return;
          if (e.status) { state.textContent = errText(e); return; } // bay refused: no retry
          failures++;
        }
        if (!ended && !ctl.signal.aborted) {
          state.replaceChildren(badge('running'), ' reconnecting…');
          await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** failures, 10000)));
        }
      }
    })();
  }

  load();
  return () => { alive = false; clearTimeout(listTimer); if (stream) stream.abort(); };
}

// browserTab takes screenshots with the sandbox's browser through the public browser exec
// API: the browser saves them under /workspace/screenshots, and the page shows them through
// the files API (downloaded with the key, shown from a blob: URL).
function browserTab(body, id) {
  let alive = true, shown = '';
  const url = h('input', { id: 'shot-url', type: 'url', placeholder: 'https://example.org/ (optional: the current page otherwise)', autocomplete: 'off', spellcheck: false });
  const full = h('input', { id: 'shot-full', type: 'checkbox' });
  const take = h('button', { type: 'submit', class: 'primary' }, 'Take screenshot');
  const status = h('p', { id: 'shot-status', class: 'muted', 'aria-live': 'polite' });
  const view = h('figure', { id: 'shot-view', hidden: true });
  const list = h('div', { id: 'shot-list' }, h('p', { class: 'muted' }, 'loading…'));
  const exec = async (cmd) => {
    const r = await call('POST', sandboxPath(id, '/browser/exec'), { cmd, timeout: 60 });
    if (!r.success) throw new Error((r.error || r.output || 'the browser command failed').trim());
    return r;
  };
  const form = h('form', {
    class: 'card row-form', 'aria-label': 'Take a browser screenshot',
    onsubmit: (e) => {
      e.preventDefault();
      busy(take, async () => {
        const u = url.value.trim();
        if (u) {
          if (!/^https?:\/\/\S+$/.test(u)) { status.textContent = 'Give an http:// or https:// address without spaces.'; return; }
          status.textContent = 'opening ' + u + '…';
          await exec("open '" + u.replace(/'/g, "'\\''") + "'");
        }
        const path = 'screenshots/console-' + new Date().toISOString().replace(/[:.]/g, '-') + '.png';
        status.textContent = 'taking the screenshot…';
        await exec('screenshot ' + path + (full.checked ? ' --full' : ''));
        status.textContent = 'Saved to /workspace/' + path;
        await show(path);
        load();
      }).catch(() => {});
    },
  }, h('div', { class: 'field full' }, h('label', { for: 'shot-url' }, 'Open this address first'), url),
  h('div', { class: 'field check' }, full, h('label', { for: 'shot-full' }, 'whole page')), take, h('div', { class: 'full' }, status));
  body.append(form, view, h('h2', {}, 'Screenshots in /workspace/screenshots'), list);

  async function show(path) {
    const b = await blob(sandboxPath(id, '/filesystem/download') + qs({ path }));
    if (!alive) return;
    if (shown) URL.revokeObjectURL(shown);
    shown = URL.createObjectURL(b);
    fill(view, h('img', { src: shown, alt: 'Browser screenshot ' + path, class: 'shot' }), h('figcaption', { class: 'mono' }, '/workspace/' + path + ' · ' + fmtBytes(b.size)));
    view.hidden = false;
  }
  async function load() {
    try {
      // The directory appears with the first screenshot: look for it first, so that a
      // sandbox without one does not meet a 404.
      const root = await get(sandboxPath(id, '/filesystem/directories') + qs({ path: '.' }));
      if (!alive) return;
      if (!(root.entries || []).some((e) => e.is_dir && e.name === 'screenshots')) { fill(list, h('p', { class: 'empty' }, 'No screenshots yet.')); return; }
      const r = await get(sandboxPath(id, '/filesystem/directories') + qs({ path: 'screenshots' }));
      if (!alive) return;
      const shots = (r.entries || []).filter((e) => !e.is_dir && /\.png$/i.test(e.name)).sort((a, b) => (a.name < b.name ? 1 : -1));
      fill(list, table('Screenshots', ['File', 'Size', ''], shots.map((e) => [h('span', { class: 'mono' }, e.name), fmtBytes(e.size),
        h('button', { type: 'button', 'aria-label': 'Show ' + e.name, onclick: (ev) => busy(ev.currentTarget, () => show('screenshots/' + e.name)) }, 'Show')]), 'No screenshots yet.'));
    } catch (e) {
      if (!alive) return;
      fill(list, h('p', { class: 'error-text' }, errText(e)));
    }
  }
  load();
  return () => { alive = false; if (shown) URL.revokeObjectURL(shown); };
}

function metricsTab(body, id) {
  const path = sandboxPath(id, '/metrics');
  let alive = true, timer = 0;
  const samples = [];
  const box = h('div', {}, h('p', { class: 'muted' }, 'loading…'));
  body.append(h('h2', {}, 'Usage'), box);
  async function tick() {
    try {
      const m = await get(path);
      if (!alive) return;
      samples.push(Object.assign({ at: new Date() }, m));
      if (samples.length > 60) samples.shift();
      fill(box, 
        table('Containers', ['Container', 'CPU s', 'Memory', 'Memory limit', 'Pids'], (m.containers || []).map((c) => [
          c.name, (c.cpu_seconds || 0).toFixed(2), fmtBytes(c.memory_bytes), fmtBytes(c.memory_limit_bytes), String(c.pids) + (c.pids_limit ? ' / ' + c.pids_limit : '')]), 'No running containers.'),
        m.disk ? h('p', {}, 'Disk: ' + fmtBytes(m.disk.used_bytes) + ' of ' + fmtBytes(m.disk.limit_bytes)) : null,
        h('h3', {}, 'Memory over time (last ' + samples.length + ' samples)'),
        spark(samples.map((s) => (s.containers || []).reduce((t, c) => t + (c.memory_bytes || 0), 0))));
      timer = setTimeout(tick, 5000);
    } catch (e) {
      if (!alive) return;
      fill(box, e.status === 404 ? unavailable('Usage metrics', path) : h('p', { class: 'error-text' }, errText(e)));
    }
  }
  tick();
  return () => { alive = false; clearTimeout(timer); };
}

// spark draws a series as bars of an SVG (attributes, not style, so the CSP holds).
function spark(values) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 300 60');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'latest ' + fmtBytes(values[values.length - 1] || 0));
  const max = Math.max(1, ...values);
  values.forEach((v, i) => {
    const r = document.createElementNS(NS, 'rect');
    const hgt = Math.max(1, (v / max) * 58);
    r.setAttribute('x', String(i * 5)); r.setAttribute('width', '4');
    r.setAttribute('y', String(60 - hgt)); r.setAttribute('height', String(hgt));
    svg.append(r);
  });
  return svg;
}

// networkTab shows the effective policy (the sandbox's network field) and the refusals.
async function networkTab(body, id) {
  body.append(h('h2', {}, 'Network policy'));
  try {
    const sb = await get(sandboxPath(id, ''));
    body.append(sb.network ? generic('Network policy', sb.network) : unavailable('Network policy', sandboxPath(id, '')));
  } catch (e) { body.append(h('p', { class: 'error-text' }, errText(e))); }
  const ev = sandboxPath(id, '/network/events');
  try {
    const r = await get(ev);
    body.append(h('h3', {}, 'Refused connections'), generic('Refused connections', r));
  } catch (e) { if (e.status !== 404) body.append(h('p', { class: 'error-text' }, errText(e))); }
}

export { images, outputBlock, stripANSI };
