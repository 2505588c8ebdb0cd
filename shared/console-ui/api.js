// The public API, as any client calls it: x-api-key and a bearer token on
// every request, JSON in and out, errors as problem+json. The API's base is
// the console's parent path (`/prod/console` → `/prod/`).

import * as auth from './auth.js';

const BASE = new URL('./', document.baseURI);

/** An error answer (or no answer): `detail` is what to show. */
export class ApiError extends Error {
  constructor(status, problem) {
    const fields = Array.isArray(problem.errors)
      ? problem.errors.map((e) => `${e.field}: ${e.message}`).join('; ')
      : '';
    const detail = String(problem.detail || problem.title || `the API answered ${status}`);
    super(fields && !detail.includes(fields) ? `${detail} (${fields})` : detail);
    this.status = status;
    this.code = typeof problem.code === 'string' ? problem.code : '';
    this.problem = problem;
  }
}

async function send(method, path, session, { query, body, signal }) {
  const url = new URL(path.replace(/^\//, ''), BASE);
  if (query) {
    for (const [k, v] of Object.entries(query)) {
      for (const one of [].concat(v)) if (one !== undefined && one !== null && one !== '') url.searchParams.append(k, one);
    }
  }
  const headers = { 'x-api-key': session.apiKey, Authorization: `Bearer ${session.token}`, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store', signal,
    });
  } catch (e) {
    if (signal && signal.aborted) throw e; // the view that asked is gone: nobody shows it
    throw new ApiError(0, { detail: 'The API could not be reached: check the connection and that the service is running.' });
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let json;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  if (!response.ok) throw new ApiError(response.status, json && typeof json === 'object' ? json : { detail: text.slice(0, 200) });
  return json;
}

/**
 * A call. `signal` aborts it (the view that asked was left). On a 401 the
 * hosted sign-in's token is refreshed (one refresh for all the calls that
 * got a 401 with the same token) and the call repeated with the new one.
 */
export async function call(method, path, options = {}) {
  const session = options.credentials || auth.current();
  if (!session) throw new ApiError(401, { detail: 'You are signed out.' });
  const used = session.token; // the session object is updated in place by a refresh
  try {
    return await send(method, path, session, options);
  } catch (e) {
    if (!(e instanceof ApiError) || options.credentials) throw e;
    if (e.status === 401 && await auth.refresh(session, used)) {
      return send(method, path, session, options);
    }
    // Only the session that was refused ends: a late answer must not sign out a newer one.
    if ((e.status === 401 || e.code === 'API_KEY_INVALID' || e.code === 'API_KEY_MISSING') && auth.current() === session) {
      auth.signOut(`The API refused the credentials: ${e.message}`);
    }
    throw e;
  }
}

export const get = (path, query, { signal } = {}) => call('GET', path, { query, signal });
export const post = (path, body, { signal } = {}) => call('POST', path, { body: body === undefined ? {} : body, signal });
export const del = (path, { signal } = {}) => call('DELETE', path, { signal });

/** Checks credentials before a session starts (one small list call). */
export function check(credentials) {
  return call('GET', 'webhooksubscription/all', { query: { size: 1 }, credentials });
}

export const enc = encodeURIComponent;
