// Cargos, admin (GC, API keys, warm pool), audited executions and the skill library. The last
// ones degrade to a notice while this bay does not offer their endpoints.
import { call, get, qs } from './api.js';
import { h, clear, fill, fmtTime, fmtBytes, notify, errText, confirmButton, busy, table, unavailable, generic } from './ui.js';

function head(title) {
  document.title = title + ' · Shipyard console';
  return h('div', { class: 'page-head' }, h('h1', {}, title));
}

async function section(box, title, path, render) {
  try {
    const v = await get(path);
    fill(box, render ? render(v) : generic(title, v));
  } catch (e) {
    fill(box, e.status === 404 ? unavailable(title, path) : h('p', { class: 'error-text' }, errText(e)));
  }
}

function boxed(title, level) {
  const box = h('div', {}, h('p', { class: 'muted' }, 'loading…'));
  return [h(level || 'h2', {}, title), box];
}

export function cargosPage(main) {
  const [t, box] = boxed('Cargos (volumes)');
  const managed = h('input', { id: 'cg-managed', type: 'checkbox', onchange: () => load() });
  const size = h('input', { id: 'cg-size', type: 'number', min: '1', max: '65536', placeholder: 'default' });
  const create = h('button', { type: 'submit' }, 'Create cargo');
  main.append(head('Cargos'),
    h('form', {
      class: 'card row-form', 'aria-label': 'Create a cargo',
      onsubmit: (e) => {
        e.preventDefault();
        busy(create, async () => {
          const n = parseInt(size.value, 10);
          const c = await call('POST', '/v1/cargos', isNaN(n) ? {} : { size_limit_mb: n }, { idempotent: true });
          notify('Created ' + c.id, 'ok'); load();
        });
      },
    }, h('div', { class: 'field' }, h('label', { for: 'cg-size' }, 'Size limit (MB)'), size), create),
    h('div', { class: 'filters' }, h('div', { class: 'field check' }, managed, h('label', { for: 'cg-managed' }, 'include managed cargos'))),
    t, box);
  function load() {
    section(box, 'Cargos', '/v1/cargos' + qs({ managed: managed.checked ? 'true' : '', limit: 200 }), (r) => table('Cargos',
      ['Cargo', 'Managed by', 'Backend', 'Size limit', 'Created', 'Last used', 'Actions'], r.items.map((c) => [
        h('span', { class: 'mono' }, c.id), c.managed_by_sandbox_id ? h('a', { href: '#/sandboxes/' + encodeURIComponent(c.managed_by_sandbox_id), class: 'mono' }, c.managed_by_sandbox_id) : (c.managed ? 'managed' : 'external'),
        c.backend, c.size_limit_mb + ' MB', fmtTime(c.created_at), fmtTime(c.last_accessed_at),
        c.managed ? '—' : confirmButton('Delete', 'Really?', async () => { await call('DELETE', '/v1/cargos/' + encodeURIComponent(c.id)); notify('Deleted ' + c.id, 'ok'); load(); },
          { class: 'danger', 'aria-label': 'Delete ' + c.id })]), 'No cargos.'));
  }
  load();
}

export function adminPage(main) {
  const [gt, gbox] = boxed('Garbage collection');
  const [kt, kbox] = boxed('API keys');
  const [wt, wbox] = boxed('Warm pool');
  const [mt, mbox] = boxed('Readiness');
  const result = h('div', { id: 'gc-result', 'aria-live': 'polite' });
  const run = (dry) => async (e) => busy(e.currentTarget, async () => {
    const r = await call('POST', '/v1/admin/gc/run', { dry_run: dry });
    fill(result, h('p', {}, (dry ? 'Dry run: ' : 'Ran: ') + r.total_cleaned + ' cleaned, ' + r.total_errors + ' errors, ' + r.duration_ms + ' ms'),
      table('GC results', ['Task', 'Cleaned', 'Skipped', 'Would clean', 'Errors'], r.results.map((t) => [t.task_name, String(t.cleaned_count), String(t.skipped_count), (t.would_clean || []).join(', ') || '—', (t.errors || []).join('; ') || '—'])));
    loadGC();
  });
  main.append(head('Admin'), gt,
    h('div', { class: 'actions' }, h('button', { type: 'button', onclick: run(true) }, 'Dry run GC'), h('button', { type: 'button', class: 'primary', onclick: run(false) }, 'Run GC now')),
    gbox, result, kt, kbox, wt, wbox, mt, mbox);
  function loadGC() {
    section(gbox, 'GC status', '/v1/admin/gc/status', (s) => h('dl', { class: 'facts' },
      h('dt', {}, 'Enabled'), h('dd', {}, s.enabled ? 'yes' : 'no'),
      h('dt', {}, 'Running now'), h('dd', {}, s.is_running ? 'yes' : 'no'),
      h('dt', {}, 'Instance'), h('dd', { class: 'mono' }, s.instance_id),
      h('dt', {}, 'Interval'), h('dd', {}, s.interval_seconds + ' s'),
      h('dt', {}, 'Last run'), h('dd', {}, fmtTime(s.last_run_at)),
      h('dt', {}, 'Tasks'), h('dd', {}, Object.entries(s.tasks || {}).map(([k, v]) => k + (v.enabled ? '' : ' (off)')).join(', '))));
  }
  loadGC();
  section(kbox, 'API keys', '/v1/admin/api_keys');
  section(wbox, 'Warm pool', '/v1/admin/warm_pool');
  section(mbox, 'Readiness', '/readyz');
}

export function execsPage(main) {
  const [t, box] = boxed('Audited executions');
  main.append(head('Executions'), t, box);
  section(box, 'Audited executions', '/v1/sandbox/execs');
}

export function skillsPage(main) {
  const [t, box] = boxed('Skill library');
  main.append(head('Skills'), t, box);
  section(box, 'Skills', '/v1/skills', (r) => table('Skills', ['Name', 'Kind', 'Description', 'Files', 'Size', 'Version', 'Uploaded'],
    (r.items || []).map((s) => [s.name, s.kind, s.description, String(s.file_count), fmtBytes(s.size_bytes), h('span', { class: 'mono' }, String(s.version).slice(0, 12)), fmtTime(s.created_at)]), 'No skills yet.'));
}
