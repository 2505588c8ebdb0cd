// The console's entry: configuration, sign-in (fragment link, hosted
// sign-in return, or the form), the header, and the router over
// `#/subscriptions`, `#/subscriptions/<id>` (its deliveries) and
// `#/subscriptions/<id>/notifications/<uuid>` (one notification).

import { h, show, toast } from './dom.js';
import * as api from './api.js';
import * as auth from './auth.js';
import * as oauth from './oauth.js';
import * as signin from './signin.js';
import * as subscriptions from './subscriptions.js';
import * as deliveries from './deliveries.js';
import * as notification from './notification.js';
import { view } from './view.js';

const main = document.getElementById('main');
const account = document.getElementById('account');
let config = { oauth: null };
let current = null; // the view shown: stopped (its requests aborted) when another is shown

/** The route's parts, decoded; null when one is not valid percent-encoding (`%E0%A4%A`). */
function routeParts(hash) {
  try {
    return hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  } catch {
    return null;
  }
}

function route() {
  if (current) current.stop();
  current = view({});
  const session = auth.current();
  renderAccount(session);
  if (!session) {
    signin.render(main, { config, message: route.message });
    route.message = '';
    return;
  }
  const parts = routeParts(window.location.hash);
  if (!parts) {
    show(main, h('div', { class: 'card' },
      h('h1', {}, 'This address cannot be read'),
      h('p', { class: 'error', role: 'alert' },
        `The part after # (${window.location.hash}) is not valid percent-encoding: a % must be followed by the code of a character.`),
      h('p', {}, h('a', { href: '#/subscriptions' }, 'Go to the subscriptions'))));
  } else if (parts[0] === 'subscriptions' && parts[1] && parts[2] === 'notifications' && parts[3]) {
    current.params = { id: parts[1], uuid: parts[3] };
    notification.render(main, current);
  } else if (parts[0] === 'subscriptions' && parts[1]) {
    current.params = { id: parts[1] };
    deliveries.render(main, current);
  } else {
    if (parts[0] !== 'subscriptions' || parts.length > 1) {
      history.replaceState(null, '', '#/subscriptions');
    }
    subscriptions.render(main, current);
  }
  main.focus({ preventScroll: true });
}

function renderAccount(session) {
  if (!session) {
    show(account);
    return;
  }
  const out = h('button', { type: 'button', class: 'link-button' }, 'Sign out');
  out.addEventListener('click', () => auth.signOut('You signed out.'));
  show(account,
    h('span', { class: 'org', title: 'Your organization (from the access token)' },
      session.organization ? `Organization ${session.organization}` : 'Signed in'),
    out);
}

auth.onChange((session, reason) => {
  route.message = session ? '' : reason;
  if (!session && reason === 'You signed out.') toast('You signed out.');
  route();
});

window.addEventListener('hashchange', () => {
  // A pasted sign-in link while the page is open.
  const handed = auth.takeFromFragment();
  if (handed) {
    signInWith(handed);
    return;
  }
  route();
});

async function signInWith(credentials) {
  show(main, h('p', { class: 'loading', role: 'status' }, 'Signing in…'));
  try {
    await api.check(credentials);
    auth.signIn({ ...credentials, config });
  } catch (e) {
    route.message = `Sign-in with the link failed: ${e.message}`;
    route();
  }
}

async function start() {
  const handed = auth.takeFromFragment();
  try {
    const response = await fetch('console/config.json', { cache: 'no-cache', credentials: 'omit' });
    if (response.ok) config = await response.json();
  } catch {
    // Without the document the form still works; only the hosted sign-in is missing.
  }
  if (handed) {
    await signInWith(handed);
    return;
  }
  if (config.oauth) {
    try {
      const back = await oauth.finish(config.oauth);
      if (back) {
        auth.signIn({ apiKey: back.apiKey, token: back.tokens.access_token, oauthTokens: back.tokens, config });
        return;
      }
    } catch (e) {
      route.message = `The hosted sign-in failed: ${e.message}`;
    }
  }
  route();
}

start().catch((e) => {
  // Never left on "Loading the console…".
  show(main, h('p', { class: 'error', role: 'alert' }, `The console could not start: ${e.message}`));
});
