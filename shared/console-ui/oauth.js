// Sign-in through the deployment's OAuth 2.0 provider (the Cognito hosted
// UI): the authorization code flow with PKCE (S256) for a public client.
// The code verifier, the state and the API key the user typed wait in this
// tab's sessionStorage during the round trip to the provider only, and are
// removed as soon as the page is back. Tokens are kept in memory (auth.js).

const PENDING = 'webhooks-console-oauth';

function base64url(bytes) {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomString(bytes = 48) {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** This page's address without query or fragment: the redirect URI. */
export function redirectUri() {
  return `${window.location.origin}${window.location.pathname}`;
}

/** Sends the browser to the provider's sign-in page. */
export async function start(config, apiKey) {
  const verifier = randomString();
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  const state = randomString(16);
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, apiKey }));
  const url = new URL(config.authorizationUrl);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: config.clientId,
    redirect_uri: redirectUri(),
    scope: config.scopes,
    state,
    code_challenge_method: 'S256',
    code_challenge: base64url(new Uint8Array(digest)),
  }).toString();
  window.location.assign(url.toString());
}

async function tokenCall(config, form) {
  let response;
  try {
    response = await fetch(config.tokenUrl, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form).toString(),
      credentials: 'omit',
    });
  } catch {
    throw new Error('the sign-in service could not be reached');
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok || typeof body.access_token !== 'string') {
    throw new Error(body.error_description || body.error || `the sign-in service answered ${response.status}`);
  }
  return body;
}

/**
 * When the provider sent the browser back here (`?code=&state=`): removes
 * them from the address bar, checks the state and exchanges the code.
 * Returns {apiKey, tokens}, or null when this is no such return.
 */
export async function finish(config) {
  const params = new URLSearchParams(window.location.search);
  const code = params.get('code');
  const error = params.get('error');
  if (!code && !error) return null;
  history.replaceState(null, '', `${window.location.pathname}#/subscriptions`);
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || 'null');
  sessionStorage.removeItem(PENDING);
  if (error) throw new Error(params.get('error_description') || error);
  if (!pending || pending.state !== params.get('state')) {
    throw new Error('the sign-in answer does not belong to this tab: please sign in again');
  }
  const tokens = await tokenCall(config, {
    grant_type: 'authorization_code',
    client_id: config.clientId,
    code,
    redirect_uri: redirectUri(),
    code_verifier: pending.verifier,
  });
  return { apiKey: pending.apiKey, tokens };
}

export function refresh(config, refreshToken) {
  return tokenCall(config, { grant_type: 'refresh_token', client_id: config.clientId, refresh_token: refreshToken });
}

export async function revoke(config, refreshToken) {
  await fetch(config.revokeUrl, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: refreshToken, client_id: config.clientId }).toString(),
    credentials: 'omit',
  });
}
