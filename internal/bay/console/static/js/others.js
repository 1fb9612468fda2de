// Cargos, audited executions and the skill library. The last
// ones degrade to a notice while this bay does not offer their endpoints.
import { call, get, qs, blob, upload, saveBlob } from './api.js';
import { h, clear, fill, badge, fmtTime, fmtBytes, notify, errText, confirmButton, busy, table, unavailable, generic } from './ui.js';

export function head(title) {
  document.title = title + ' · Shipyard console';
  return h('div', { class: 'page-head' }, h('h1', {}, title));
}

// section loads path into box; a 404 is a feature this bay lacks, a 403 one this key may not
// see (the admin pages).
export async function section(box, title, path, render) {
  try {
    const v = await get(path);
    fill(box, render ? render(v) : generic(title, v));
  } catch (e) {
    fill(box, e.status === 404 ? unavailable(title, path)
      : e.status === 403 ? h('p', { class: 'muted forbidden' }, title + ' needs an admin API key.')
        : h('p', { class: 'error-text' }, errText(e)));
  }
}

export function boxed(title, level) {
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

export function execsPage(main) {
  const [t, box] = boxed('Audited executions');
  const detail = h('div', { id: 'exec-detail', 'aria-live': 'polite' });
  main.append(head('Executions'), t, box, detail);
  section(box, 'Audited executions', '/v1/sandbox/execs?limit=100', (r) => table('Audited executions',
    ['Exec', 'Status', 'Exit', 'Command', 'Image', 'Skill', 'Created', 'Duration'], (r.items || []).map((x) => [
      h('a', { href: '#', class: 'mono', onclick: (e) => { e.preventDefault(); showExec(detail, x); } }, x.exec_id),
      badge(x.status), x.exit_code === null || x.exit_code === undefined ? '—' : String(x.exit_code),
      h('code', {}, [x.cmd].concat(x.args || []).join(' ')), x.image || '—', x.skill_id || '—', fmtTime(x.created_at),
      x.duration_ms ? x.duration_ms + ' ms' : '—']), 'No audited executions yet.'));
}

// showExec shows one audited execution: its record, its output and its artifacts.
async function showExec(box, x) {
  const base = '/v1/sandbox/execs/' + encodeURIComponent(x.exec_id);
  const artifact = (p) => base + '/artifacts/' + p.split('/').map(encodeURIComponent).join('/');
  fill(box, h('h2', {}, 'Execution ', h('span', { class: 'mono' }, x.exec_id)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Status'), h('dd', {}, badge(x.status), x.error_reason ? ' ' + x.error_reason : ''),
      h('dt', {}, 'Project'), h('dd', {}, x.project_id || '—'),
      h('dt', {}, 'Working directory'), h('dd', { class: 'mono' }, x.cwd || '—'),
      h('dt', {}, 'Environment'), h('dd', {}, (x.env_keys || []).join(', ') || '—'),
      h('dt', {}, 'Started / ended'), h('dd', {}, fmtTime(x.started_at) + ' → ' + fmtTime(x.ended_at))),
    h('p', { class: 'muted' }, 'loading output and artifacts…'));
  const parts = [];
  for (const [label, p, cut] of [['stdout', x.stdout_path, x.stdout_truncated], ['stderr', x.stderr_path, x.stderr_truncated]]) {
    if (!p) continue;
    try {
      const text = await (await blob(artifact(p))).text();
      if (text) parts.push(h('h3', {}, label + (cut ? ' (truncated)' : '')), h('pre', { class: label === 'stderr' ? 'out err' : 'out', tabIndex: 0 }, text));
    } catch (e) { parts.push(h('p', { class: 'error-text' }, label + ': ' + errText(e))); }
  }
  try {
    const a = await get(base + '/artifacts');
    parts.push(h('h3', {}, 'Artifacts (' + fmtBytes(a.total_bytes) + ')'),
      table('Artifacts', ['Path', 'Size', 'SHA-256', ''], (a.files || []).map((f) => [
        h('span', { class: 'mono' }, f.path), fmtBytes(f.size), h('span', { class: 'mono small' }, String(f.sha256 || '').slice(0, 16)),
        h('button', { type: 'button', 'aria-label': 'Download ' + f.path, onclick: (e) => busy(e.currentTarget, () => saveBlob(artifact(f.path), f.path.split('/').pop())) }, 'Download')]), 'No artifacts.'),
      a.drop_reason ? h('p', { class: 'muted' }, 'Dropped: ' + a.drop_reason) : null);
  } catch (e) { parts.push(h('p', { class: 'error-text' }, 'artifacts: ' + errText(e))); }
  box.lastChild.remove();
  box.append(...parts.filter(Boolean));
}

export function skillsPage(main) {
  const [t, box] = boxed('Skill library');
  const detail = h('div', { id: 'skill-detail', 'aria-live': 'polite' });
  const archive = h('input', { id: 'skill-archive', type: 'file', accept: '.zip,.tar.gz,.tgz,application/zip,application/gzip' });
  const progress = h('progress', { max: 1, value: 0, hidden: true, 'aria-label': 'Upload progress' });
  const out = h('div', { id: 'skill-admin-result', 'aria-live': 'polite' });
  const send = (path, what) => async (e) => busy(e.currentTarget, async () => {
    const f = archive.files[0];
    if (!f) { notify('Choose a skill archive (zip or tar.gz) first.', 'error'); return; }
    progress.hidden = false; progress.value = 0;
    const r = await upload(path, {}, f, (p) => { progress.value = p; });
    const v = r.skill ? { valid: true, name: r.skill.name, version: r.skill.version, errors: [], warnings: r.warnings } : r;
    fill(out, h('p', {}, what + ': ', v.valid ? h('span', { class: 'ok-text' }, 'valid') : h('span', { class: 'error-text' }, 'invalid'),
      v.name ? ' · ' + v.name : '', v.version ? ' · ' + String(v.version).slice(0, 12) : '', r.created === false ? ' · unchanged' : ''),
    problems('Errors', v.errors), problems('Warnings', v.warnings));
    if (r.skill) load();
  });
  const form = h('form', { class: 'card row-form', 'aria-label': 'Upload a skill', hidden: true, onsubmit: (e) => e.preventDefault() },
      h('h2', {}, 'Upload (admin)'),
      h('div', { class: 'field' }, h('label', { for: 'skill-archive' }, 'Skill archive (zip or tar.gz)'), archive),
      h('button', { type: 'button', onclick: send('/v1/admin/skills/validate', 'Validation') }, 'Validate'),
      h('button', { type: 'button', class: 'primary', onclick: send('/v1/admin/skills', 'Upload') }, 'Upload'),
      progress, h('div', { class: 'full' }, out));
  main.append(head('Skills'), form, t, box, detail);
  // The admin form shows once the library answers (absent on a bay without one).
  function load() {
    return section(box, 'Skills', '/v1/skills', (r) => table('Skills', ['Name', 'Kind', 'Description', 'Files', 'Size', 'Version', 'Uploaded', ''],
      (r.items || []).map((s) => [
        h('a', { href: '#', onclick: (e) => { e.preventDefault(); showSkill(detail, s.name); } }, s.name), s.kind, s.description, String(s.file_count),
        fmtBytes(s.size_bytes), h('span', { class: 'mono' }, String(s.version).slice(0, 12)), fmtTime(s.created_at),
        confirmButton('Delete', 'Really?', async () => { await call('DELETE', '/v1/admin/skills/' + encodeURIComponent(s.name)); notify('Deleted ' + s.name, 'ok'); load(); },
          { class: 'danger', 'aria-label': 'Delete skill ' + s.name })]), 'No skills yet.'));
  }
  load().then(() => { form.hidden = !!box.querySelector('.unavailable'); });
}

function problems(title, list) {
  if (!list || !list.length) return null;
  return [h('h3', {}, title), h('ul', {}, list.map((p) => h('li', {}, h('span', { class: 'mono' }, p.file + (p.field ? ' · ' + p.field : '')), ': ' + p.message)))];
}

async function showSkill(box, name) {
  fill(box, h('p', { class: 'muted' }, 'loading ' + name + '…'));
  try {
    const d = await get('/v1/skills/' + encodeURIComponent(name));
    fill(box, h('h2', {}, name), h('h3', {}, 'SKILL.md'), h('pre', { class: 'file-text', tabIndex: 0 }, d.skill_md || ''),
      h('h3', {}, 'Files'), table('Files of ' + name, ['Path', 'Size', 'Executable'], (d.files || []).map((f) => [h('span', { class: 'mono' }, f.path), fmtBytes(f.size), f.executable ? 'yes' : '']), 'No files.'),
      d.manifest_json ? [h('h3', {}, 'manifest.json'), h('pre', { class: 'json', tabIndex: 0 }, JSON.stringify(d.manifest_json, null, 2))] : null);
  } catch (e) { fill(box, h('p', { class: 'error-text' }, errText(e))); }
}
