// The subscriptions page: every subscription of the organization with its
// uri, status, filters (disabled ones with their reason) and expiry; create,
// delete (confirmed), reactivate (post its uri again), reveal and copy the
// signing secret.

import { h, show, toast, confirmDialog, badge } from './dom.js';
import * as api from './api.js';
import { time, relative, filterWords, STATUS_HELP, handshakeFailure, validationFailure, destinationWords, healthWords, healthClass } from './format.js';
import { form } from './subscription-form.js';
import { catalogue } from './event-types.js';

const SIZE = 20;

// A v1a subscription has a public key to show; its private key never leaves the service.
const revealWords = (sub) => (sub.signatureScheme === 'v1a' ? 'Show public key' : 'Reveal secret');

export function render(main, ctx) {
  let page = 0;
  const listRequest = ctx.latest(); // "Next" pressed twice: only the last page asked is shown
  const status = h('div', { class: 'status-line', role: 'status', 'aria-live': 'polite' });
  const list = h('div', { class: 'list' });
  const formSlot = h('div');
  const newButton = h('button', { type: 'button', class: 'primary' }, 'New subscription');
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of subscriptions' });

  const openForm = () => {
    newButton.hidden = true;
    show(formSlot, h('div', { class: 'form-beside' }, form({
      created: (sub) => {
        closeForm();
        toast(`Subscription created: ${sub.uri}`);
        page = 0;
        load();
      },
      cancel: () => closeForm(),
    }), catalogue()));
  };
  const closeForm = () => { show(formSlot); newButton.hidden = false; newButton.focus(); };
  newButton.addEventListener('click', openForm);

  show(main,
    h('div', { class: 'page-head' },
      h('h1', {}, 'Subscriptions'),
      newButton),
    formSlot, status, list, pager);

  async function load() {
    const signal = listRequest();
    show(status, h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Loading subscriptions…');
    let result;
    try {
      result = await api.get('webhooksubscription/all', { page, size: SIZE, sort: 'createdDateTime,desc' }, { signal });
    } catch (e) {
      if (signal.aborted) return;
      show(status, h('p', { class: 'error', role: 'alert' }, `Could not load the subscriptions: ${e.message}`));
      return;
    }
    if (signal.aborted) return;
    show(status);
    if (result.totalElements === 0) {
      show(list, h('div', { class: 'empty' },
        h('h2', {}, 'No subscriptions yet'),
        h('p', {}, 'Create one with "New subscription": give the URL of your callback and the events it wants. '
          + 'Locally, "webhooks-local listen --port 4000" runs a callback that answers the handshake.')));
      show(pager);
      return;
    }
    show(list, h('ul', { class: 'cards', 'aria-label': 'Subscriptions' }, result.content.map((sub) => card(sub))));
    renderPager(result);
  }

  function renderPager(result) {
    if (result.totalPages <= 1) {
      show(pager, h('span', { class: 'muted' }, `${result.totalElements} subscription${result.totalElements === 1 ? '' : 's'}`));
      return;
    }
    const prev = h('button', { type: 'button', disabled: result.first }, 'Previous');
    const next = h('button', { type: 'button', disabled: result.last }, 'Next');
    prev.addEventListener('click', () => { page -= 1; load(); });
    next.addEventListener('click', () => { page += 1; load(); });
    show(pager, prev, h('span', {}, `Page ${result.number + 1} of ${result.totalPages} (${result.totalElements} subscriptions)`), next);
  }

  function card(sub) {
    const secretSlot = h('div', { class: 'secret' });
    const actions = h('div', { class: 'actions' });
    const deliveries = h('a', { class: 'button primary', href: `#/subscriptions/${api.enc(sub.id)}` }, 'Deliveries');
    const reveal = h('button', { type: 'button' }, revealWords(sub));
    const remove = h('button', { type: 'button', class: 'danger' }, 'Delete');
    actions.append(deliveries, reveal);
    if (sub.status === 'BLACKLISTED' || sub.status === 'EXPIRED') {
      const reactivate = h('button', { type: 'button', class: 'secondary' }, 'Reactivate');
      reactivate.addEventListener('click', () => reactivateSub(sub, reactivate));
      actions.append(reactivate);
    }
    actions.append(remove);

    reveal.addEventListener('click', () => toggleSecret(sub, reveal, secretSlot));
    remove.addEventListener('click', async () => {
      const yes = await confirmDialog({
        title: 'Delete this subscription?',
        body: `${sub.uri} will receive no more notifications, and its delivery history will no longer be reachable. This cannot be undone.`,
        confirm: 'Delete',
        danger: true,
      });
      if (!yes) { remove.focus(); return; }
      remove.disabled = true;
      try {
        await api.del(`webhooksubscription/${api.enc(sub.id)}`);
        toast(`Deleted ${sub.uri}`);
        load();
      } catch (e) {
        remove.disabled = false;
        show(status, h('p', { class: 'error', role: 'alert' }, `Could not delete: ${e.message}`));
      }
    });

    const filters = h('ul', { class: 'filters' },
      sub.eventFilters.map((f) => h('li', {}, h('code', {}, f), h('span', { class: 'muted' }, ` ${filterWords(f)}`))),
      (sub.disabledFilters || []).map((d) => h('li', { class: 'disabled-filter' },
        h('code', {}, d.filter),
        h('span', { class: 'reason' }, ` disabled: ${d.reason}`),
        d.message ? h('span', { class: 'muted' }, ` (${d.message})`) : null)));

    return h('li', { class: 'card subscription', 'data-id': sub.id },
      h('div', { class: 'card-head' },
        h('h2', { class: 'uri' }, sub.uri),
        badge(sub.status)),
      h('p', { class: 'muted' }, STATUS_HELP[sub.status] || ''),
      h('dl', { class: 'facts' },
        ...(sub.destination ? [
          h('dt', {}, 'Destination'), h('dd', { class: 'destination' }, destinationWords(sub.destination)),
          h('dt', {}, 'Role'), h('dd', {}, h('code', { class: 'role-arn' }, sub.destination.roleArn)),
          h('dt', {}, 'External id'), h('dd', {}, h('code', { class: 'external-id' }, sub.destination.externalId)),
        ] : []),
        h('dt', {}, 'Filters'), h('dd', {}, filters),
        ...(sub.payloadFilter ? [h('dt', {}, 'Payload filter'), h('dd', {}, h('code', { class: 'payload-filter' }, JSON.stringify(sub.payloadFilter)))] : []),
        h('dt', {}, 'Signatures'), h('dd', { class: 'signature-scheme' }, sub.signatureScheme === 'v1a' ? 'v1a (ed25519, public key)' : 'v1 (HMAC-SHA256)'),
        ...(sub.retrySchedule ? [h('dt', {}, 'Retries'), h('dd', {}, 'after ', h('code', { class: 'retry-schedule' }, sub.retrySchedule.join(', ')), ', then given up')] : []),
        ...(sub.customHeaders ? [h('dt', {}, 'Custom headers'), h('dd', {}, h('code', { class: 'custom-headers' },
          Object.entries(sub.customHeaders).map(([name, masked]) => `${name}: ${masked}`).join(', ')))] : []),
        h('dt', {}, 'Delivery'), h('dd', { class: healthClass(sub.health) }, healthWords(sub.health)),
        ...(sub.ordered ? [h('dt', {}, 'Order'), h('dd', { class: 'ordered' }, 'in the order events were accepted, one at a time')] : []),
        h('dt', {}, 'Rate limit'), h('dd', {}, sub.rateLimit ? `${sub.rateLimit} notifications a second` : 'none'),
        h('dt', {}, 'Expires'), h('dd', {}, `${time(sub.expirationTime)} `, h('span', { class: 'muted' }, `(${relative(sub.expirationTime)})`)),
        h('dt', {}, 'Created'), h('dd', {}, time(sub.createdDateTime)),
        h('dt', {}, 'Id'), h('dd', {}, h('code', {}, sub.id))),
      secretSlot,
      actions);
  }

  async function toggleSecret(sub, button, slot) {
    if (slot.childElementCount) {
      show(slot);
      button.textContent = revealWords(sub);
      return;
    }
    button.disabled = true;
    try {
      // A v1a subscription answers its public key only: the private key never leaves the service.
      const { key, publicKey } = await api.get(`webhooksubscription/${api.enc(sub.id)}/secret`, undefined, { signal: ctx.signal });
      const value = publicKey || key;
      const what = publicKey ? 'Public key' : 'Signing secret';
      const copy = h('button', { type: 'button' }, 'Copy');
      copy.addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText(value);
          toast(`${what} copied`);
        } catch {
          toast(`Copying was refused by the browser: select the ${what.toLowerCase()} and copy it`);
        }
      });
      show(slot, h('label', {}, what), h('div', { class: 'inline' }, h('code', { class: publicKey ? 'public-key' : 'secret-value' }, value), copy));
      button.textContent = publicKey ? 'Hide public key' : 'Hide secret';
    } catch (e) {
      show(slot, h('p', { class: 'error', role: 'alert' }, `Could not read the secret: ${e.message}`));
    } finally {
      button.disabled = false;
    }
  }

  async function reactivateSub(sub, button) {
    button.disabled = true;
    button.textContent = sub.destination ? 'Validating the destination…' : 'Calling the callback…';
    try {
      // Posting the uri again re-runs the handshake and reactivates it
      // (a fresh default lifetime: an EXPIRED one's expiry is past).
      const target = sub.destination
        ? { destination: { type: sub.destination.type, arn: sub.destination.arn, roleArn: sub.destination.roleArn } }
        : { uri: sub.uri };
      await api.post('webhooksubscription', { ...target, eventFilters: sub.eventFilters, expiresDateInMillies: 0 });
      toast(`Reactivated ${sub.uri}`);
      load();
    } catch (e) {
      button.disabled = false;
      button.textContent = 'Reactivate';
      const words = sub.destination ? validationFailure(e.code) : handshakeFailure(e.code);
      show(status, h('p', { class: 'error', role: 'alert' }, `Could not reactivate: ${words ? `${words} ` : ''}${e.message}`));
    }
  }

  load();
}
