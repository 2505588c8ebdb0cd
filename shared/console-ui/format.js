// How values from the API are shown: times, durations, and the failure
// codes of handshakes and deliveries in words.

const pad = (n) => String(n).padStart(2, '0');

/** ISO 8601 → local "YYYY-MM-DD HH:MM:SS"; '—' when absent. */
export function time(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} `
    + `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A span of milliseconds in the largest sensible unit. */
export function span(ms) {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  if (abs < 60_000) return `${Math.round(abs / 1000)} s`;
  if (abs < 3_600_000) return `${Math.round(abs / 60_000)} min`;
  if (abs < 2 * 86_400_000) return `${Math.round(abs / 3_600_000)} h`;
  return `${Math.round(abs / 86_400_000)} days`;
}

/** "in 5 min" / "3 h ago" relative to now. */
export function relative(iso, now = Date.now()) {
  if (!iso) return '';
  const ms = new Date(iso).getTime() - now;
  if (Number.isNaN(ms)) return '';
  return ms >= 0 ? `in ${span(ms)}` : `${span(ms)} ago`;
}

/** A local datetime-local input value for a time. */
export function inputValue(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** What a failing step means (handshake and delivery codes). */
export const CODES = {
  DNS_FAILED: 'the callback\'s host name could not be resolved',
  ADDRESS_FORBIDDEN: 'the callback\'s address is not allowed (loopback, private, link-local or reserved)',
  CONNECT_FAILED: 'the service could not connect to the callback',
  TLS_FAILED: 'the TLS handshake with the callback failed',
  TIMEOUT: 'the callback did not answer in time',
  BAD_STATUS: 'the callback answered with a status other than the one expected',
  TOKEN_MISSING: 'the callback\'s answer did not echo the validation-token header',
  TOKEN_MISMATCH: 'the callback echoed a different validation-token than the one sent',
  REDIRECT: 'the callback answered with a redirect, which is never followed',
  SUBSCRIPTION_NOT_ACTIVE: 'the subscription was deleted, not ACTIVE or expired, so it was not sent',
  UNSENDABLE: 'the notification can never be sent (unusable secret or uri)',
  // AWS destinations (docs/destinations.md).
  DESTINATION_FORBIDDEN: 'the destination is not in this service\'s region and partition, or the role is in another account',
  ROLE_NOT_ASSUMABLE: 'the role could not be assumed: it does not exist, does not trust the service, or requires another external id',
  DESTINATION_NOT_FOUND: 'the queue or event bus does not exist',
  SEND_DENIED: 'the role may not send to the queue or put events on the bus',
  DESTINATION_THROTTLED: 'AWS throttled the send',
  DESTINATION_ERROR: 'AWS failed to take the message',
};

/** The failing step of a destination's validation, as a sentence. */
export function validationFailure(value) {
  const words = CODES[value];
  return words ? `Validation failed: ${words}.` : null;
}

/** A destination's kind in words. */
export function destinationWords(destination) {
  if (destination.type === 'eventbridge') return 'EventBridge bus';
  return destination.arn.endsWith('.fifo') ? 'SQS FIFO queue' : 'SQS queue';
}

/** A code in words, with the code itself. */
export function code(value) {
  if (!value) return '—';
  const words = CODES[value];
  return words ? `${words} (${value})` : String(value);
}

/** The failing step of a handshake, as a sentence. */
export function handshakeFailure(value) {
  const words = CODES[value];
  return words ? `Handshake failed: ${words}.` : null;
}

/** Subscription statuses in words. */
export const STATUS_HELP = {
  ACTIVE: 'receives notifications',
  BLACKLISTED: 'deliveries kept failing: reactivate it once the callback works',
  EXPIRED: 'past its expiry: reactivate it to receive notifications again',
};

/** A subscription's `health` (its circuit breaker, the receiver's pause) in words. */
export function healthWords(health) {
  if (!health) return 'unknown';
  const last = health.lastFailure
    ? `last failure ${health.lastFailure.httpStatus ? `HTTP ${health.lastFailure.httpStatus}` : health.lastFailure.code} ${relative(health.lastFailure.timestamp)}`
    : '';
  const failures = `${health.consecutiveFailures} failed attempt${health.consecutiveFailures === 1 ? '' : 's'} in a row`;
  if (health.pausedUntil) {
    return `paused by the receiver until ${time(health.pausedUntil)} (${relative(health.pausedUntil)}): `
      + 'it answered 429 or 503 with Retry-After, so nothing is sent before then';
  }
  switch (health.state) {
    case 'open':
      return `paused: the callback looks down (${failures}; ${last}); next try ${relative(health.openUntil)}`;
    case 'half-open':
      return `trying the callback again (${failures}; ${last})`;
    default:
      return health.consecutiveFailures > 0 ? `delivering (${failures}; ${last})` : `delivering${last ? ` (${last})` : ''}`;
  }
}

/** The class of a `health` line: its breaker's state, or `health-paused` while paused. */
export function healthClass(health) {
  if (!health) return 'health health-unknown';
  return `health health-${health.pausedUntil ? 'paused' : health.state}`;
}

/** Filter paths in words. */
export function filterWords(filter) {
  const ops = /^\/orgId\/[^/]+\/subscription(?:\?type=(.+))?$/.exec(filter);
  if (ops) {
    const kinds = ops[1] ? ops[1].split(',').join(', ') : 'failing, recovered, disabled, exhausted, expiring';
    return `news about this organization's subscriptions (${kinds})`;
  }
  const m = /^\/orgId\/([^/]+)\/department\/([^/]+)\/(message\?direction=(inbound|outbound)|contact)$/.exec(filter);
  if (!m) return String(filter);
  const what = m[4] ? `${m[4]} messages` : 'contact changes';
  return `${what} of department ${m[2]}`;
}
