// One notification: its state, payload and every attempt (time, duration,
// outcome, HTTP status, failing step, the callback's answer as text,
// trigger); "Resend" sends it again now. Refreshes while PENDING.

import { h, show, showIfChanged, toast, badge } from './dom.js';
import * as api from './api.js';
import { time, relative, code } from './format.js';

export function render(main, ctx) {
  const { id, uuid } = ctx.params;
  const path = `webhooksubscription/${api.enc(id)}/notifications/${api.enc(uuid)}`;
  const body = h('div', {}, h('p', { class: 'loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Loading the notification…'));
  const request = ctx.latest();
  let pending = false;
  let sending = false; // Resend's POST under way
  let page = null; // the parts built by the first answer; later ones update them in place

  show(main,
    h('p', { class: 'crumbs' },
      h('a', { href: '#/subscriptions' }, 'Subscriptions'), ' / ',
      h('a', { href: `#/subscriptions/${api.enc(id)}` }, 'Deliveries')),
    body);

  async function load() {
    const signal = request();
    let n;
    try {
      n = await api.get(path, undefined, { signal });
    } catch (e) {
      if (signal.aborted) return;
      const problem = h('p', { class: 'error', role: 'alert' }, e.status === 404
        ? 'This notification is not in the history (it may be past the retention, or the subscription was deleted).'
        : `Could not load the notification: ${e.message}`);
      // A failed poll says so above what is shown, and leaves the rest as it is.
      if (page) show(page.problem, problem); else show(body, problem);
      return;
    }
    if (signal.aborted) return;
    pending = n.status === 'PENDING';
    if (!page) page = build(n);
    update(page, n);
  }

  // Built once: the header with Resend and its note, the cards, the payload
  // (which never changes). Polling updates what changed, so the note stays
  // and an attempt the user opened or closed stays so.
  function build(n) {
    const resend = h('button', { type: 'button', class: 'primary' }, 'Resend');
    const note = h('span', { class: 'muted', role: 'status' });
    resend.addEventListener('click', async () => {
      resend.disabled = true;
      sending = true;
      show(note, 'Sending again…');
      try {
        await api.post(`${path}/resend`);
        toast('Queued to be sent again now');
        show(note, 'Queued: the new attempt appears below.');
        pending = true;
        setTimeout(() => { if (ctx.alive()) load(); }, 500);
      } catch (e) {
        resend.disabled = false;
        show(note, h('span', { class: 'error' }, `Could not resend: ${e.message}`));
      } finally {
        sending = false;
      }
    });
    const parts = {
      resend,
      badge: h('span'),
      problem: h('div'),
      facts: h('div'),
      attemptsTitle: h('h2', { id: 'attempts-title' }),
      none: h('p', { class: 'empty' }, 'No attempt yet: the first one is made as soon as a delivery worker takes it.'),
      attempts: h('ol', { class: 'attempts' }),
      shown: new Map(), // attempt number → its element (an attempt never changes once made)
    };
    show(body,
      h('div', { class: 'page-head' },
        h('h1', {}, 'Notification'),
        parts.badge,
        h('div', { class: 'inline' }, resend, note)),
      parts.problem,
      h('section', { class: 'card' }, parts.facts),
      h('section', { class: 'card', 'aria-labelledby': 'attempts-title' }, parts.attemptsTitle, parts.none, parts.attempts),
      h('section', { class: 'card' },
        h('h2', {}, 'Payload'),
        h('p', { class: 'hint' }, 'The exact JSON body sent to the callback (signed with the Standard Webhooks headers).'),
        h('pre', { class: 'payload', tabindex: 0 }, JSON.stringify(n.payload, null, 2))));
    return parts;
  }

  function update(parts, n) {
    if (!sending) parts.resend.disabled = false;
    show(parts.problem);
    showIfChanged(parts.badge, badge(n.status));
    showIfChanged(parts.facts, facts(n));
    parts.attemptsTitle.textContent = `Attempts (${n.attempts.length})`;
    parts.none.hidden = n.attempts.length > 0;
    // Newest first; an attempt already shown keeps its element, so its
    // <details> stays as the user left it.
    const items = n.attempts.slice().reverse().map((a) => {
      if (!parts.shown.has(a.attempt)) parts.shown.set(a.attempt, attempt(a));
      return parts.shown.get(a.attempt);
    });
    const list = parts.attempts.children;
    if (items.length !== list.length || items.some((item, i) => list[i] !== item)) parts.attempts.replaceChildren(...items);
  }

  ctx.every(1500, () => (pending ? load() : null));
  load();
}

function facts(n) {
  return h('dl', { class: 'facts' },
    h('dt', {}, 'Uuid (webhook-id)'), h('dd', {}, h('code', {}, n.uuid)),
    h('dt', {}, 'Event'), h('dd', {}, h('code', {}, n.event)),
    h('dt', {}, 'Event id'), h('dd', {}, h('code', {}, n.eventId)),
    h('dt', {}, 'Created'), h('dd', {}, time(n.createdDateTime)),
    h('dt', {}, 'Last attempt'), h('dd', {}, time(n.lastAttemptTime)),
    h('dt', {}, 'Next attempt'), h('dd', {}, n.nextAttemptTime ? `${time(n.nextAttemptTime)} (${relative(n.nextAttemptTime)})` : '—'),
    h('dt', {}, 'Last HTTP status'), h('dd', {}, n.lastHttpStatus === null || n.lastHttpStatus === undefined ? '—' : String(n.lastHttpStatus)),
    h('dt', {}, 'Last failing step'), h('dd', {}, code(n.lastCode)));
}

function attempt(a) {
  const ok = a.outcome === 'SUCCEEDED';
  return h('li', { class: `attempt ${ok ? 'ok' : 'failed'}`, 'data-attempt': a.attempt, 'data-trigger': a.trigger },
    h('div', { class: 'attempt-head' },
      h('strong', {}, `Attempt ${a.attempt}`),
      badge(a.outcome),
      h('span', { class: 'tag' }, a.trigger),
      h('span', { class: 'muted' }, `${time(a.timestamp)} · ${a.durationMs} ms`)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'HTTP status'), h('dd', {}, a.httpStatus === null || a.httpStatus === undefined ? '—' : String(a.httpStatus)),
      h('dt', {}, 'Failing step'), h('dd', {}, code(a.code))),
    h('details', { open: !ok && a.responseBody ? true : undefined },
      h('summary', {}, a.responseBody ? `Response body (${a.responseBody.length} characters, shown as text)` : 'Response body (empty)'),
      h('pre', { class: 'response-body', tabindex: 0 }, a.responseBody || '')));
}
