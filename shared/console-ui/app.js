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

const main = document.getElementById('main');
const account = document.getElementById('account');
let config = { oauth: null };
let view = null; // the page shown: its timers stop when another is shown

/** What a page gets: the route's ids and helpers bound to its lifetime. */
function context(params) {
  const own = { alive: true, timers: [] };
  view = own;
  return {
    params,
    alive: () => own.alive && view === own,
    every(ms, fn) { own.timers.push(setInterval(() => { if (view === own) fn(); }, ms)); },
    stop() { own.alive = false; own.timers.forEach(clearInterval); },
  };
}

let current = null;

function route() {
  if (current) current.stop();
  const session = auth.current();
  renderAccount(session);
  if (!session) {
    current = context({});
    signin.render(main, { config, message: route.message });
    route.message = '';
    return;
  }
  const parts = window.location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  current = context({});
  if (parts[0] === 'subscriptions' && parts[1] && parts[2] === 'notifications' && parts[3]) {
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

start();
