// Creating a subscription: the callback uri (or an AWS destination: a
// queue or bus and the role to reach it), its filters, an optional expiry.
// The service calls the callback's handshake (or validates the destination)
// before storing it; when that fails, the failing step is said in words.

import { h } from './dom.js';
import * as api from './api.js';
import * as auth from './auth.js';
import { handshakeFailure, validationFailure } from './format.js';

const KINDS = [
  ['message?direction=inbound', 'Inbound messages'],
  ['message?direction=outbound', 'Outbound messages'],
  ['contact', 'Contact changes'],
  // Organization-wide (no department): news about this organization's own
  // subscriptions failing, recovering, disabled or expiring.
  ['subscription', 'Operational (subscriptions failing, expiring)'],
];

/** The form; `created(subscription)` is called after a create. */
export function form({ created, cancel }) {
  const org = auth.current().organization || '<org>';
  const target = h('select', { id: 'new-target', name: 'target' },
    h('option', { value: 'https' }, 'HTTPS callback'),
    h('option', { value: 'sqs' }, 'SQS queue in your AWS account'),
    h('option', { value: 'eventbridge' }, 'EventBridge bus in your AWS account'));
  const uri = h('input', { id: 'new-uri', name: 'uri', type: 'url', required: true, placeholder: 'https://example.com/webhooks', autocomplete: 'off' });
  const arn = h('input', { id: 'new-arn', name: 'arn', type: 'text', placeholder: 'arn:aws:sqs:us-east-1:111122223333:orders', autocomplete: 'off', spellcheck: 'false' });
  const role = h('input', { id: 'new-role', name: 'roleArn', type: 'text', placeholder: 'arn:aws:iam::111122223333:role/webhooks-delivery', autocomplete: 'off', spellcheck: 'false' });
  // What the role must trust, asked for once the first time an AWS destination is picked.
  const identity = h('dl', { class: 'facts identity' });
  let identityAsked = false;
  const showIdentity = async () => {
    if (identityAsked) return;
    identityAsked = true;
    try {
      const { externalId, accountId } = await api.get('webhooksubscription/destination-identity');
      identity.replaceChildren(
        h('dt', {}, 'External id'), h('dd', {}, h('code', { class: 'external-id' }, externalId)),
        ...(accountId ? [h('dt', {}, 'Trusted account'), h('dd', {}, h('code', { class: 'account-id' }, accountId))] : []));
    } catch (e) {
      identityAsked = false;
      identity.replaceChildren(h('dd', { class: 'error' }, `Could not read the external id: ${e.message}`));
    }
  };
  // Optional: the callback's own headers (docs/api.md, "Custom headers").
  const customHeaders = h('textarea', { id: 'new-custom-headers', name: 'customHeaders', rows: 2, spellcheck: 'false',
    autocomplete: 'off', placeholder: 'Authorization: Bearer …' });
  const callbackFields = h('div', { class: 'target-fields' },
    h('label', { for: 'new-uri' }, 'Callback URI'),
    uri,
    h('p', { class: 'hint' }, 'The service first sends it a GET with a validation-token header, which it must echo in a 200 answer.'),
    h('label', { for: 'new-custom-headers' }, 'Custom headers (optional, one Name: value per line)'),
    customHeaders,
    h('p', { class: 'hint' }, 'Sent on every delivery and on the handshake, e.g. Authorization: Bearer …; '
      + 'the values are secrets, shown masked afterwards (docs/api.md, "Custom headers").'));
  const awsFields = h('div', { class: 'target-fields', hidden: true },
    h('label', { for: 'new-arn' }, 'Queue or bus ARN'),
    arn,
    h('label', { for: 'new-role' }, 'Role ARN'),
    role,
    h('p', { class: 'hint' }, 'A role in the same account that trusts the service with your organization\'s external id '
      + '(docs/destinations.md has its CloudFormation template). The service assumes it, then sends a validation message.'),
    identity);
  const aws = () => target.value !== 'https';
  target.addEventListener('change', () => {
    callbackFields.hidden = aws();
    // A hidden required field would stop the browser from submitting.
    uri.required = !aws();
    if (aws()) showIdentity();
    awsFields.hidden = !aws();
    arn.placeholder = target.value === 'eventbridge'
      ? 'arn:aws:events:us-east-1:111122223333:event-bus/orders'
      : 'arn:aws:sqs:us-east-1:111122223333:orders';
  });
  const filters = h('textarea', { id: 'new-filters', name: 'filters', rows: 3, spellcheck: 'false', required: true });
  filters.value = `/orgId/${org}/department/dep-1/message?direction=inbound`;
  const department = h('input', { id: 'new-department', type: 'text', value: 'dep-1', 'aria-label': 'Department', size: 10 });
  const kind = h('select', { id: 'new-kind', 'aria-label': 'Event kind' }, KINDS.map(([v, label]) => h('option', { value: v }, label)));
  const add = h('button', { type: 'button' }, 'Add filter');
  add.addEventListener('click', () => {
    const line = kind.value === 'subscription'
      ? `/orgId/${org}/subscription`
      : `/orgId/${org}/department/${department.value.trim() || 'dep-1'}/${kind.value}`;
    const lines = filters.value.split('\n').map((l) => l.trim()).filter(Boolean);
    if (!lines.includes(line)) lines.push(line);
    filters.value = lines.join('\n');
  });
  // Optional: a JSON filter over what an event says (docs/api.md, "Payload filters").
  const payloadFilter = h('textarea', { id: 'new-payload-filter', name: 'payloadFilter', rows: 3, spellcheck: 'false',
    placeholder: '{"message.to": {"$in": ["+15550001"]}}' });
  // `v1a`: ed25519, receivers verify with a public key (docs/api.md, "ed25519 signatures (`v1a`)").
  const scheme = h('select', { id: 'new-signature-scheme', name: 'signatureScheme' },
    h('option', { value: 'v1' }, 'v1: HMAC-SHA256, a shared secret'),
    h('option', { value: 'v1a' }, 'v1a: ed25519, receivers verify with a public key'));
  // Optional: its own waits after a failed attempt (docs/api.md, "Retry schedules").
  const retrySchedule = h('input', { id: 'new-retry-schedule', name: 'retrySchedule', type: 'text',
    placeholder: '1m, 10m, 1h, 6h, 12h', autocomplete: 'off', spellcheck: 'false' });
  const expires = h('input', { id: 'new-expires', name: 'expires', type: 'datetime-local' });
  const error = h('div', { class: 'error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Create subscription');
  const close = h('button', { type: 'button' }, 'Cancel');
  close.addEventListener('click', cancel);

  const el = h('form', { class: 'card create', novalidate: true, 'aria-labelledby': 'create-title' },
    h('h2', { id: 'create-title' }, 'New subscription'),
    h('label', { for: 'new-target' }, 'Deliver to'),
    target,
    callbackFields,
    awsFields,
    h('label', { for: 'new-filters' }, 'Event filters (one per line)'),
    filters,
    h('div', { class: 'inline' }, department, kind, add),
    h('label', { for: 'new-payload-filter' }, 'Payload filter (optional JSON)'),
    payloadFilter,
    h('p', { class: 'hint' }, 'Only events whose content matches are sent, e.g. {"message.text": {"$prefix": "STOP"}}; '
      + 'operators $eq, $in, $prefix, $exists, $gt, $gte, $lt, $lte, $and, $or, $not.'),
    h('label', { for: 'new-signature-scheme' }, 'Signatures'),
    scheme,
    h('label', { for: 'new-retry-schedule' }, 'Retry schedule (optional)'),
    retrySchedule,
    h('p', { class: 'hint' }, 'The waits after a failed attempt, comma-separated (30s, 2m, 1h or seconds): '
      + '1 to 20 waits of 1s to 12h, 48h in all; given up after the last. Empty: the service\'s schedule.'),
    h('label', { for: 'new-expires' }, 'Expires (optional)'),
    expires,
    h('p', { class: 'hint' }, 'Empty: the default lifetime (90 days unless the service is configured otherwise).'),
    error,
    h('div', { class: 'actions' }, close, submit));

  el.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.hidden = true;
    const body = {
      eventFilters: filters.value.split('\n').map((l) => l.trim()).filter(Boolean),
      expiresDateInMillies: expires.value ? new Date(expires.value).getTime() : 0,
    };
    if (scheme.value === 'v1a') body.signatureScheme = 'v1a';
    const missing = aws()
      ? [[arn, 'Enter the queue\'s or bus\'s ARN.'], [role, 'Enter the role\'s ARN.']].find(([input]) => !input.value.trim())
      : (!uri.value.trim() ? [uri, 'Enter the callback URI.'] : null);
    if (!missing && payloadFilter.value.trim()) {
      try {
        body.payloadFilter = JSON.parse(payloadFilter.value);
      } catch (e) {
        error.replaceChildren(`The payload filter is not JSON: ${e.message}`);
        error.hidden = false;
        payloadFilter.focus();
        return;
      }
    }
    if (retrySchedule.value.trim()) {
      // A bare number is seconds; the service checks the rest and names the wait at fault.
      body.retrySchedule = retrySchedule.value.split(',').map((w) => w.trim()).filter(Boolean)
        .map((w) => (/^[0-9]+$/.test(w) ? Number(w) : w));
    }
    if (!missing && !aws() && customHeaders.value.trim()) {
      const lines = customHeaders.value.split('\n').map((l) => l.trim()).filter(Boolean);
      const pairs = lines.map((l) => [l.slice(0, l.indexOf(':')).trim(), l.slice(l.indexOf(':') + 1).trim()]);
      const names = pairs.map(([name]) => name.toLowerCase());
      const bad = lines.findIndex((l, i) => l.indexOf(':') < 1 || !pairs[i][0] || names.indexOf(names[i]) !== i);
      if (bad >= 0) {
        error.replaceChildren(`Custom headers: line ${bad + 1} is not Name: value, or repeats a name.`);
        error.hidden = false;
        customHeaders.focus();
        return;
      }
      body.customHeaders = Object.fromEntries(pairs);
    }
    if (missing) {
      error.replaceChildren(missing[1]);
      error.hidden = false;
      missing[0].focus();
      return;
    }
    if (aws()) {
      body.destination = { type: target.value, arn: arn.value.trim(), roleArn: role.value.trim() };
    } else {
      body.uri = uri.value.trim();
    }
    submit.disabled = true;
    submit.textContent = aws() ? 'Validating the destination…' : 'Calling the callback…';
    try {
      const subscription = await api.post('webhooksubscription', body);
      created(subscription);
    } catch (e) {
      const words = aws() ? validationFailure(e.code) : handshakeFailure(e.code);
      error.replaceChildren(
        h('strong', {}, words || 'The subscription was not created.'),
        h('br'),
        e.message,
        e.code ? ` (${e.code})` : '');
      error.hidden = false;
    } finally {
      submit.disabled = false;
      submit.textContent = 'Create subscription';
    }
  });
  setTimeout(() => uri.focus());
  return el;
}
