// The admin page: garbage collection, API keys and owners, the warm pools, readiness. Every
// call is the public API v1 with the tab's key; a key that is not an admin key sees each
// section say so (403).
import { call } from './api.js';
import { h, fill, fmtTime, fmtIn, notify, confirmButton, busy, table } from './ui.js';
import { head, boxed, section } from './others.js';

export function adminPage(main) {
  const [gt, gbox] = boxed('Garbage collection');
  const [kt, kbox] = boxed('API keys');
  const [ot, obox] = boxed('Owners');
  const [wt, wbox] = boxed('Warm pool');
  const [mt, mbox] = boxed('Readiness');
  const result = h('div', { id: 'gc-result', 'aria-live': 'polite' });
  const run = (dry) => async (e) => busy(e.currentTarget, async () => {
    const r = await call('POST', '/v1/admin/gc/run', { dry_run: dry });
    fill(result, h('p', {}, (dry ? 'Dry run: ' : 'Ran: ') + r.total_cleaned + ' cleaned, ' + r.total_errors + ' errors, ' + r.duration_ms + ' ms'),
      table('GC results', ['Task', 'Cleaned', 'Skipped', 'Would clean', 'Errors'], r.results.map((t) => [t.task_name, String(t.cleaned_count), String(t.skipped_count), (t.would_clean || []).join(', ') || '—', (t.errors || []).join('; ') || '—'])));
    loadGC();
  });
  const keyForm = createKeyForm(() => { loadKeys(); loadOwners(); });
  main.append(head('Admin'), gt,
    h('div', { class: 'actions' }, h('button', { type: 'button', onclick: run(true) }, 'Dry run GC'), h('button', { type: 'button', class: 'primary', onclick: run(false) }, 'Run GC now')),
    gbox, result, kt, keyForm, kbox, ot, obox, wt, wbox, mt, mbox);
  function loadGC() {
    section(gbox, 'GC status', '/v1/admin/gc/status', (s) => h('dl', { class: 'facts' },
      h('dt', {}, 'Enabled'), h('dd', {}, s.enabled ? 'yes' : 'no'),
      h('dt', {}, 'Running now'), h('dd', {}, s.is_running ? 'yes' : 'no'),
      h('dt', {}, 'Instance'), h('dd', { class: 'mono' }, s.instance_id),
      h('dt', {}, 'Interval'), h('dd', {}, s.interval_seconds + ' s'),
      h('dt', {}, 'Last run'), h('dd', {}, fmtTime(s.last_run_at)),
      h('dt', {}, 'Tasks'), h('dd', {}, Object.entries(s.tasks || {}).map(([k, v]) => k + (v.enabled ? '' : ' (off)')).join(', '))));
  }
  function loadKeys() {
    return section(kbox, 'API keys', '/v1/admin/keys', (r) => table('API keys',
      ['Name', 'Prefix', 'Owner', 'Source', 'Created', 'Last used', 'State', ''], r.items.map((k) => [
        k.name || '—', h('span', { class: 'mono' }, k.prefix + '…'), k.owner + (k.admin ? ' (admin)' : ''),
        k.source === 'config' ? 'configuration' : 'stored', fmtTime(k.created_at), k.last_used_at ? fmtIn(k.last_used_at) : 'never',
        k.active ? 'active' : 'revoked ' + fmtTime(k.revoked_at),
        k.active && k.source !== 'config'
          ? confirmButton('Revoke', 'Really revoke?', async () => {
            await call('DELETE', '/v1/admin/keys/' + encodeURIComponent(k.id));
            notify('Revoked ' + (k.name || k.prefix), 'ok'); loadKeys(); loadOwners();
          }, { class: 'danger', 'aria-label': 'Revoke key ' + (k.name || k.prefix) })
          : '—']), 'No keys.')).then(() => { keyForm.hidden = !kbox.querySelector('table, .empty'); });
  }
  function loadOwners() {
    section(obox, 'Owners', '/v1/admin/owners', (r) => table('Owners', ['Owner', 'Active keys', 'Revoked keys', 'Admin', 'Sandboxes'],
      r.items.map((o) => [o.owner, String(o.active_keys), String(o.revoked_keys), o.admin ? 'yes' : 'no', String(o.sandboxes)]), 'No owners.'));
  }
  loadGC();
  loadKeys();
  loadOwners();
  section(wbox, 'Warm pool', '/v1/admin/warmpool', (w) => [
    h('p', { class: 'muted' }, w.enabled ? 'Maintained every ' + w.interval_seconds + ' s. Hits and misses are counted by this bay since it started.' : 'The warm pool is disabled on this bay.'),
    table('Warm pools', ['Profile', 'Target', 'Ready', 'Starting', 'Retiring', 'Hits', 'Misses'], w.profiles.map((p) => [
      h('span', { class: 'mono' }, p.profile), String(p.target), String(p.ready), String(p.starting), String(p.retiring), String(p.hits), String(p.misses)]),
    'No profile keeps a warm pool.')]);
  section(mbox, 'Readiness', '/readyz');
}

// createKeyForm creates a key and shows its secret once, with a button that copies it; the
// secret is in the page until the admin dismisses it or leaves the page, never stored.
function createKeyForm(created) {
  const owner = h('input', { id: 'key-owner', name: 'owner', required: true, maxLength: 64, pattern: '[A-Za-z0-9_.\\-]{1,64}', autocomplete: 'off', spellcheck: false });
  const name = h('input', { id: 'key-name', name: 'name', required: true, maxLength: 64, autocomplete: 'off' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Create key');
  const out = h('div', { id: 'key-secret', 'aria-live': 'polite', class: 'full' });
  const form = h('form', {
    class: 'card row-form', 'aria-label': 'Create an API key', hidden: true,
    onsubmit: (e) => {
      e.preventDefault();
      busy(submit, async () => {
        const k = await call('POST', '/v1/admin/keys', { owner: owner.value.trim(), name: name.value.trim() });
        name.value = '';
        const secret = h('input', { id: 'key-secret-value', type: 'text', readOnly: true, value: k.key, class: 'mono', spellcheck: false });
        fill(out, h('div', { class: 'note ok secret' },
          h('p', {}, 'Key “' + k.name + '” for ', h('strong', {}, k.owner), ' created. Copy it now: bay keeps only its hash and will not show it again.'),
          h('label', { for: 'key-secret-value' }, 'New API key'), secret,
          h('div', { class: 'actions' },
            h('button', { type: 'button', onclick: async (ev) => { secret.select(); try { await navigator.clipboard.writeText(k.key); notify('Copied', 'ok'); } catch (_) { ev.currentTarget.textContent = 'Select and copy by hand'; } } }, 'Copy'),
            h('button', { type: 'button', onclick: () => fill(out) }, 'Done'))));
        created();
      });
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'key-owner' }, 'Owner'), owner),
  h('div', { class: 'field' }, h('label', { for: 'key-name' }, 'Name'), name),
  submit,
  h('p', { class: 'muted full' }, 'Keys of the owner “default” are admin keys.'),
  out);
  return form;
}
