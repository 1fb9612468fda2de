// The console's router: the URL fragment names the page (#/sandboxes, #/sandboxes/<id>/files,
// ...), so every page is served as index.html and nothing of the state travels to the server.
import { apiKey, setAPIKey, clearAPIKey, call, setUnauthorizedHandler } from './api.js';
import { h, clear, notify, errText } from './ui.js';
import { sandboxesPage } from './sandboxes.js';
import { sandboxPage } from './sandbox.js';
import { cargosPage, skillsPage, execsPage } from './others.js';
import { adminPage } from './admin.js';

const main = document.getElementById('main');
let cleanup = null;

function signInPage() {
  const input = h('input', { id: 'apikey', type: 'password', name: 'apikey', autocomplete: 'off', required: true, spellcheck: false });
  const msg = h('p', { class: 'error-text', role: 'alert' });
  const form = h('form', {
    class: 'card signin', 'aria-labelledby': 'signin-title',
    onsubmit: async (e) => {
      e.preventDefault();
      clear(msg);
      const key = input.value.trim();
      if (!key) return;
      setAPIKey(key);
      try {
        await call('GET', '/v1/sandboxes?limit=1', undefined, { probe: true });
        input.value = '';
        if (!location.hash || location.hash === '#/signin') location.hash = '#/sandboxes';
        route();
      } catch (err) {
        clearAPIKey();
        msg.textContent = err.status === 401 ? 'This API key was not accepted.' : errText(err);
      }
    },
  },
  h('h1', { id: 'signin-title' }, 'Sign in'),
  h('p', { class: 'muted' }, 'Paste an API key of this bay. It stays in this browser tab only and is gone when the tab closes.'),
  h('label', { for: 'apikey' }, 'API key'), input,
  h('button', { type: 'submit', class: 'primary' }, 'Sign in'), msg);
  main.replaceChildren(form);
  input.focus();
}

function signOut() {
  clearAPIKey();
  route();
}

setUnauthorizedHandler(() => {
  clearAPIKey();
  notify('Your API key is no longer accepted; sign in again.', 'error');
  route();
});

const pages = [
  [/^#\/sandboxes\/([^/]+)(?:\/([a-z]+))?$/, (m) => sandboxPage(main, decodeURIComponent(m[1]), m[2] || 'overview'), 'sandboxes'],
  [/^#\/sandboxes$/, () => sandboxesPage(main), 'sandboxes'],
  [/^#\/cargos$/, () => cargosPage(main), 'cargos'],
  [/^#\/execs$/, () => execsPage(main), 'execs'],
  [/^#\/skills$/, () => skillsPage(main), 'skills'],
  [/^#\/admin$/, () => adminPage(main), 'admin'],
];

function route() {
  if (cleanup) { try { cleanup(); } catch (_) { /* page already gone */ } cleanup = null; }
  const signedIn = !!apiKey();
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('signout').hidden = !signedIn;
  if (!signedIn) { document.title = 'Sign in · Shipyard console'; signInPage(); return; }
  const hash = location.hash || '#/sandboxes';
  for (const [re, page, nav] of pages) {
    const m = hash.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll('#nav a')) {
      if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    clear(main);
    cleanup = page(m) || null;
    return;
  }
  location.replace('#/sandboxes');
}

document.getElementById('signout').addEventListener('click', signOut);
window.addEventListener('hashchange', route);
call('GET', '/health').then((v) => { document.getElementById('version').textContent = 'bay ' + v.version; }).catch(() => {});
route();
