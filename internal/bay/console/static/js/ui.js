// Small DOM helpers. Nothing here writes HTML from strings or sets style attributes, so the
// Content-Security-Policy (no inline script or style) holds.

// h builds an element: attrs are properties (on*, class, dataset, aria-*, for) and children
// are nodes, strings or arrays of them (null and false are skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('aria-') || k === 'for' || k === 'role' || k === 'scope' || k === 'colspan') el.setAttribute(k, v);
    else el[k] = v;
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

export function clear(el) { while (el.firstChild) el.firstChild.remove(); return el; }

// fill replaces el's children (the same children h takes: arrays, null and false allowed).
export function fill(el, ...children) { clear(el); append(el, children); return el; }

// fmtTime renders bay's UTC timestamps in the viewer's local time.
export function fmtTime(s) {
  if (!s) return '—';
  const d = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(s) ? s : s + 'Z');
  return isNaN(d) ? s : d.toLocaleString();
}

// fmtIn says how far in the future (or past) a timestamp is.
export function fmtIn(s) {
  if (!s) return 'never';
  const d = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(s) ? s : s + 'Z');
  const sec = Math.round((d - Date.now()) / 1000);
  const a = Math.abs(sec);
  const t = a < 90 ? a + ' s' : a < 5400 ? Math.round(a / 60) + ' min' : a < 172800 ? Math.round(a / 3600) + ' h' : Math.round(a / 86400) + ' d';
  return sec >= 0 ? 'in ' + t : t + ' ago';
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}

export function badge(status) {
  return h('span', { class: 'badge st-' + String(status || 'unknown').replace(/[^a-z_]/g, '') }, status || 'unknown');
}

// notify shows a message in the live region at the top (errors stay until the next one).
export function notify(msg, kind) {
  const n = document.getElementById('notice');
  clear(n);
  if (!msg) return;
  const note = h('p', { class: 'note ' + (kind || 'info') }, msg,
    h('button', { type: 'button', class: 'link', 'aria-label': 'Dismiss message', onclick: () => note.remove() }, '×'));
  n.append(note);
  if (kind !== 'error') setTimeout(() => note.remove(), 5000);
}

export function errText(e) {
  if (!e) return '';
  if (e.name === 'TimeoutError') return 'Bay did not answer within 30 s (request given up).';
  let s = e.message || String(e);
  if (e.code) s += ' (' + e.code + (e.status ? ', HTTP ' + e.status : '') + ')';
  if (e.requestId) s += ' — request ' + e.requestId;
  return s;
}

export function showError(e) { notify(errText(e), 'error'); }

// confirmButton is a button that asks once more (its label changes) before it acts: no modal
// dialog, so keyboard and automation work the same way. Pages that poll redraw their rows, so
// the asking and working states live outside the button, keyed by the page and the button's
// label: a redraw between the two clicks keeps the question, and one during the action keeps
// the button disabled.
const confirmStates = new Map();
const ASK_MS = 4000;

export function confirmButton(label, ask, action, attrs) {
  const key = location.hash + '\n' + ((attrs && attrs['aria-label']) || label);
  const paint = (el) => {
    let st = confirmStates.get(key);
    if (st && !st.busy && st.until <= Date.now()) { confirmStates.delete(key); st = undefined; }
    el.textContent = st && !st.busy ? ask : label;
    el.classList.toggle('armed', !!st && !st.busy);
    el.disabled = !!st && !!st.busy;
  };
  // render paints whichever button for key is on the page now.
  const render = () => {
    const el = b.isConnected ? b : Array.from(document.querySelectorAll('button[data-confirm-key]')).find((x) => x.dataset.confirmKey === key);
    if (el) paint(el);
  };
  const b = h('button', Object.assign({ type: 'button' }, attrs || {}, {
    dataset: { confirmKey: key },
    onclick: async () => {
      const st = confirmStates.get(key);
      if (st && st.busy) return;
      if (!st || st.until <= Date.now()) {
        confirmStates.set(key, { until: Date.now() + ASK_MS });
        render();
        setTimeout(render, ASK_MS + 10);
        return;
      }
      confirmStates.set(key, { busy: true });
      render();
      try { await action(); } catch (e) { showError(e); } finally { confirmStates.delete(key); render(); }
    },
  }), label);
  paint(b);
  return b;
}

// busy runs action with the button disabled, reporting a failure.
export async function busy(button, action) {
  button.disabled = true;
  try { return await action(); } catch (e) { showError(e); return undefined; } finally { button.disabled = false; }
}

// table renders rows (arrays of cells) under a header, with an empty-state line. On a narrow
// window each row becomes a card whose cells carry their column's name (data-label).
export function table(caption, heads, rows, empty) {
  if (!rows.length) return h('p', { class: 'empty' }, empty || 'Nothing here.');
  return h('div', { class: 'scroll' }, h('table', {},
    h('caption', { class: 'sr-only' }, caption),
    h('thead', {}, h('tr', {}, heads.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => h('td', { dataset: { label: heads[i] || '' } }, c)))))));
}

// unavailable is the panel of a feature this bay does not offer (its endpoint answered 404).
export function unavailable(what, path) {
  return h('div', { class: 'unavailable' },
    h('p', {}, what + ' is not available on this bay.'),
    h('p', { class: 'muted' }, 'GET ' + path + ' answered 404: the server does not have this feature yet.'));
}

// generic renders any JSON value: a list of objects as a table, else preformatted JSON.
export function generic(caption, v) {
  const list = Array.isArray(v) ? v : v && (v.items || v.entries || v.results || v.jobs || v.execs || v.keys);
  if (Array.isArray(list) && list.length && typeof list[0] === 'object') {
    const heads = Object.keys(list[0]).slice(0, 8);
    return table(caption, heads, list.map((o) => heads.map((k) => scalar(o[k]))));
  }
  if (Array.isArray(list)) return h('p', { class: 'empty' }, 'Nothing here.');
  return h('pre', { class: 'json' }, JSON.stringify(v, null, 2));
}

function scalar(x) {
  if (x === null || x === undefined) return '—';
  if (typeof x === 'object') return JSON.stringify(x);
  return String(x);
}
