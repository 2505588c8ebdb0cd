// The signed-in session: the API key and access token, kept in this page's
// memory only (never in storage or cookies; a reload signs out). With the
// hosted sign-in, the refresh token too, and the access token is refreshed
// a minute before it expires.

import * as oauth from './oauth.js';

let session = null;
const listeners = new Set();

/** The current session, or null. */
export function current() {
  return session;
}

/** Called with the session (or null) whenever it changes. */
export function onChange(listener) {
  listeners.add(listener);
}

function changed(reason) {
  for (const listener of listeners) listener(session, reason);
}

/** The token's claims (not verified: the API verifies it), or {}. */
export function claims(token) {
  try {
    const part = String(token).split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const json = new TextDecoder().decode(Uint8Array.from(atob(part), (c) => c.charCodeAt(0)));
    const value = JSON.parse(json);
    return value && typeof value === 'object' ? value : {};
  } catch {
    return {};
  }
}

/** The organization the token is for (the API's default claim names). */
export function organization(token) {
  const c = claims(token);
  const org = c.org_id ?? c['custom:org_id'] ?? c.orgId;
  return typeof org === 'string' ? org : '';
}

/**
 * Starts a session. `oauthTokens` (from the hosted sign-in) carries the
 * refresh token and lifetime; a pasted token has neither.
 */
export function signIn({ apiKey, token, oauthTokens = null, config = null }) {
  signOutQuietly();
  session = { apiKey, token, organization: organization(token), refreshToken: null, timer: null, config };
  if (oauthTokens) {
    session.refreshToken = oauthTokens.refresh_token || null;
    schedule(oauthTokens.expires_in);
  }
  changed('signed-in');
}

function schedule(expiresIn) {
  const seconds = Number(expiresIn) || 3600;
  const wait = Math.max(5, seconds - 60) * 1000;
  const s = session;
  clearTimeout(s.timer);
  s.timer = setTimeout(() => { refresh(s, s.token); }, wait);
}

// The refresh under way: every call refused meanwhile waits for this one.
let refreshing = null;

/**
 * Makes `s` (the session a call used) have a token other than `stale`, the
 * one the API refused: true when it has, false when it cannot (no refresh
 * token, or another session now). Single-flight: calls refused together
 * share one refresh, and a call refused after it finished just uses its token.
 */
export function refresh(s, stale) {
  if (!s || s !== session) return Promise.resolve(false);
  if (s.token !== stale) return Promise.resolve(true);
  if (!refreshing || refreshing.session !== s) {
    const promise = renew(s).finally(() => { if (refreshing && refreshing.promise === promise) refreshing = null; });
    refreshing = { session: s, promise };
  }
  return refreshing.promise;
}

async function renew(s) {
  if (!s.refreshToken || !s.config || !s.config.oauth) return false;
  try {
    const tokens = await oauth.refresh(s.config.oauth, s.refreshToken);
    if (session !== s) return false;
    s.token = tokens.access_token;
    s.organization = organization(s.token);
    if (tokens.refresh_token) s.refreshToken = tokens.refresh_token;
    schedule(tokens.expires_in);
    return true;
  } catch (e) {
    if (session === s) signOut(`Your session ended: ${e.message}`);
    return false;
  }
}

function signOutQuietly() {
  if (!session) return;
  clearTimeout(session.timer);
  const { refreshToken, config } = session;
  session = null;
  if (refreshToken && config && config.oauth) {
    oauth.revoke(config.oauth, refreshToken).catch(() => {});
  }
}

/** Ends the session (the hosted sign-in's refresh token is revoked). */
export function signOut(reason = '') {
  signOutQuietly();
  changed(reason);
}

/**
 * Credentials handed over in the address's fragment (`#key=...&token=...`,
 * the link `webhooks-local` prints): read once, then removed from the
 * address bar and history. The fragment never reaches a server.
 */
export function takeFromFragment() {
  const hash = window.location.hash.replace(/^#/, '');
  if (!hash || hash.startsWith('/')) return null;
  const params = new URLSearchParams(hash);
  const apiKey = params.get('key');
  const token = params.get('token');
  if (!apiKey && !token) return null;
  const route = params.get('route') || '#/subscriptions';
  history.replaceState(null, '', `${window.location.pathname}${window.location.search}${route.startsWith('#/') ? route : '#/subscriptions'}`);
  return { apiKey: apiKey || '', token: token || '' };
}
