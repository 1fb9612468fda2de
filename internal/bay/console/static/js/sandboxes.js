// The sandbox list: live status by polling, filters, create from a profile, stop, extend TTL,
// delete.
import { call, get, qs, sandboxPath } from './api.js';
import { h, clear, fill, badge, fmtIn, fmtTime, notify, showError, confirmButton, busy, table } from './ui.js';

const POLL_MS = 3000;
const STATUSES = ['', 'idle', 'starting', 'ready', 'failed', 'expired'];

export function sandboxesPage(main) {
  document.title = 'Sandboxes · Shipyard console';
  let alive = true, timer = 0, items = [], more = null;
  const statusSel = h('select', { id: 'f-status', onchange: () => refresh() },
    STATUSES.map((s) => h('option', { value: s }, s || 'any status')));
  const search = h('input', { id: 'f-search', type: 'search', placeholder: 'id, profile or cargo', oninput: () => draw() });
  const profileSel = h('select', { id: 'c-profile', required: true });
  const ttl = h('input', { id: 'c-ttl', type: 'number', min: '0', max: '31622400', step: '60', value: '3600', inputMode: 'numeric' });
  const createBtn = h('button', { type: 'submit', class: 'primary' }, 'Create sandbox');
  const list = h('div', { id: 'sandbox-list', 'aria-live': 'off' });
  const updated = h('span', { class: 'muted small' });

  const create = h('form', {
    class: 'card row-form', 'aria-label': 'Create a sandbox',
    onsubmit: (e) => {
      e.preventDefault();
      busy(createBtn, async () => {
        const body = { profile: profileSel.value };
        const t = parseInt(ttl.value, 10);
        if (!isNaN(t) && t > 0) body.ttl = t;
        const sb = await call('POST', '/v1/sandboxes', body, { idempotent: true });
        notify('Created ' + sb.id, 'ok');
        location.hash = '#/sandboxes/' + encodeURIComponent(sb.id);
      });
    },
  },
  h('h2', {}, 'New sandbox'),
  h('div', { class: 'field' }, h('label', { for: 'c-profile' }, 'Profile'), profileSel),
  h('div', { class: 'field' }, h('label', { for: 'c-ttl' }, 'TTL (seconds, 0 = none)'), ttl),
  createBtn);

  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Sandboxes'), updated),
    create,
    h('div', { class: 'filters', role: 'search', 'aria-label': 'Filter sandboxes' },
      h('div', { class: 'field' }, h('label', { for: 'f-status' }, 'Status'), statusSel),
      h('div', { class: 'field grow' }, h('label', { for: 'f-search' }, 'Search'), search)),
    list);

  get('/v1/profiles?detail=true').then((p) => {
    for (const pr of p.items) {
      profileSel.append(h('option', { value: pr.id }, pr.id + ' — ' + pr.capabilities.join(', ')));
    }
  }).catch(showError);

  function actions(sb) {
    const id = sb.id;
    const live = sb.status !== 'expired';
    return h('div', { class: 'actions' },
      h('button', {
        type: 'button', 'aria-label': 'Stop ' + id, disabled: !(sb.status === 'ready' || sb.status === 'starting'),
        onclick: (e) => busy(e.currentTarget, async () => { await call('POST', sandboxPath(id, '/stop')); notify('Stopped ' + id, 'ok'); refresh(); }),
      }, 'Stop'),
      h('button', {
        type: 'button', 'aria-label': 'Extend TTL of ' + id + ' by one hour', disabled: !live || !sb.expires_at,
        onclick: (e) => busy(e.currentTarget, async () => { await call('POST', sandboxPath(id, '/extend_ttl'), { extend_by: 3600 }, { idempotent: true }); notify('Extended ' + id + ' by 1 h', 'ok'); refresh(); }),
      }, '+1 h'),
      confirmButton('Delete', 'Really delete?', async () => { await call('DELETE', sandboxPath(id)); notify('Deleted ' + id, 'ok'); refresh(); },
        { 'aria-label': 'Delete ' + id, class: 'danger' }));
  }

  function draw() {
    const q = search.value.trim().toLowerCase();
    const shown = items.filter((s) => !q || s.id.toLowerCase().includes(q) || s.profile.toLowerCase().includes(q) || (s.cargo_id || '').toLowerCase().includes(q));
    fill(list, table('Sandboxes', ['Sandbox', 'Status', 'Profile', 'Created', 'Expires', 'Idle stop', 'Actions'],
      shown.map((s) => [
        h('a', { href: '#/sandboxes/' + encodeURIComponent(s.id), class: 'mono' }, s.id),
        badge(s.status), s.profile, fmtTime(s.created_at),
        h('span', { title: s.expires_at ? fmtTime(s.expires_at) : 'no expiry' }, fmtIn(s.expires_at)),
        s.idle_expires_at ? fmtIn(s.idle_expires_at) : '—',
        actions(s),
      ]), items.length ? 'No sandbox matches the filters.' : 'No sandboxes yet: create one above.'));
    if (more) {
      list.append(h('button', { type: 'button', onclick: (e) => busy(e.currentTarget, () => load(more, true)) }, 'Load more'));
    }
  }

  async function load(cursor, append) {
    const page = await get('/v1/sandboxes' + qs({ status: statusSel.value, cursor, limit: 200 }));
    if (!alive) return;
    items = append ? items.concat(page.items) : page.items;
    more = page.next_cursor;
    updated.textContent = 'updated ' + new Date().toLocaleTimeString();
    draw();
  }

  async function refresh() {
    clearTimeout(timer);
    try { await load(null, false); } catch (e) { if (alive) showError(e); }
    if (alive) timer = setTimeout(refresh, document.hidden ? POLL_MS * 5 : POLL_MS);
  }
  refresh();
  return () => { alive = false; clearTimeout(timer); };
}
