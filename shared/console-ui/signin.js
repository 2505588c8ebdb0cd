// The sign-in page: the API key and an access token, typed or pasted; or,
// where the deployment has an OAuth provider, its hosted sign-in (the API
// key is still needed: API Gateway asks every call for it).

import { h } from './dom.js';
import * as api from './api.js';
import * as auth from './auth.js';
import * as oauth from './oauth.js';

export function render(main, { config, message }) {
  const key = h('input', { id: 'api-key', name: 'api-key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true });
  const token = h('textarea', { id: 'access-token', name: 'access-token', rows: 4, autocomplete: 'off', spellcheck: 'false' });
  const error = h('p', { class: 'error', role: 'alert', hidden: !message }, message || '');
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const fail = (text) => { error.textContent = text; error.hidden = false; };

  const form = h('form', { class: 'card signin', novalidate: true },
    h('h1', {}, 'Sign in'),
    h('p', { class: 'muted' },
      'The console calls the same API as every client: it needs the API key and an access token of your organization. '
      + 'They stay in this page\'s memory: reloading the page signs you out.'),
    h('label', { for: 'api-key' }, 'API key'),
    key,
    h('label', { for: 'access-token' }, 'Access token'),
    token,
    h('p', { class: 'hint' }, 'Locally, webhooks-local prints both when it starts, and a console link that signs you in at once.'),
    error,
    h('div', { class: 'actions' }, submit));

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const credentials = { apiKey: key.value.trim(), token: token.value.trim().replace(/^Bearer\s+/i, '') };
    if (!credentials.apiKey || !credentials.token) {
      fail('Enter both the API key and the access token.');
      return;
    }
    submit.disabled = true;
    submit.textContent = 'Signing in…';
    try {
      await api.check(credentials);
      auth.signIn({ ...credentials, config });
    } catch (e) {
      fail(`Sign-in failed: ${e.message}`);
    } finally {
      submit.disabled = false;
      submit.textContent = 'Sign in';
    }
  });

  if (config && config.oauth) {
    const hosted = h('button', { type: 'button', class: 'secondary' }, 'Sign in with your organization account');
    hosted.addEventListener('click', async () => {
      if (!key.value.trim()) {
        fail('Enter the API key first: the hosted sign-in gives the access token, not the key.');
        key.focus();
        return;
      }
      hosted.disabled = true;
      try {
        await oauth.start(config.oauth, key.value.trim());
      } catch (e) {
        hosted.disabled = false;
        fail(`The hosted sign-in could not start: ${e.message}`);
      }
    });
    form.append(h('div', { class: 'or' }, h('span', {}, 'or')),
      h('p', { class: 'muted' }, 'Enter the API key above, then sign in through the hosted page for the access token (refreshed for you while the page is open).'),
      h('div', { class: 'actions' }, hosted));
  }
  main.replaceChildren(form);
  key.focus();
}
