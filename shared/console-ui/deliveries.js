// The deliveries page of a subscription: its notifications, newest first,
// filtered by status and paged, each with status, attempts, last HTTP
// status and next attempt; "Recover failed since…"; the chart of the last
// 24 hours with the latency percentiles. Refreshes by itself: every 2 s
// while any is PENDING, every 10 s otherwise.

import { h, show, showIfChanged, toast, badge } from './dom.js';
import * as api from './api.js';
import { time, relative, code, healthWords, healthClass } from './format.js';
import { chart } from './chart.js';

const SIZE = 20;

export function render(main, ctx) {
  const { id } = ctx.params;
  const base = `webhooksubscription/${api.enc(id)}`;
  let page = 0;
  let statusFilter = '';
  let pending = false;
  // Each load of the list (or the chart) aborts the one before: a filter
  // changed while a poll is under way never shows the poll's older answer.
  const listRequest = ctx.latest();
  const statsRequest = ctx.latest();

  const title = h('h1', { class: 'uri' }, 'Deliveries');
  const subStatus = h('span');
  // The subscription's delivery health (breaker, receiver's pause): why nothing is sent.
  const subHealth = h('p', { class: 'health' });
  const statsSlot = h('div', { class: 'stats-slot' }, h('p', { class: 'loading' }, 'Loading the chart…'));
  const status = h('div', { class: 'status-line', role: 'status', 'aria-live': 'polite' });
  const list = h('div', { class: 'list' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of notifications' });

  const filter = h('select', { id: 'status-filter' },
    h('option', { value: '' }, 'All'),
    h('option', { value: 'PENDING' }, 'Pending'),
    h('option', { value: 'DELIVERED' }, 'Delivered'),
    h('option', { value: 'FAILED' }, 'Failed'));
  filter.addEventListener('change', () => { statusFilter = filter.value; page = 0; load(); });
  const refresh = h('button', { type: 'button' }, 'Refresh');
  refresh.addEventListener('click', () => { load(); loadStats(); loadSubscription(); });

  const since = h('input', { id: 'recover-since', type: 'datetime-local', required: true });
  since.value = inputValue(Date.now() - 86_400_000);
  const recoverButton = h('button', { type: 'submit' }, 'Recover failed');
  const recover = h('form', { class: 'inline recover', novalidate: true },
    h('label', { for: 'recover-since' }, 'Recover failed since'), since, recoverButton);
  recover.addEventListener('submit', async (event) => {
    event.preventDefault();
    const ms = new Date(since.value).getTime();
    if (Number.isNaN(ms)) { toast('Choose the time to recover from'); since.focus(); return; }
    recoverButton.disabled = true;
    try {
      const r = await api.post(`${base}/recover`, { since: ms });
      toast(r.notifications === 0
        ? 'No failed notifications in that window'
        : `${r.notifications} failed notification${r.notifications === 1 ? '' : 's'} sent again${r.more ? ' (more remain: recover again)' : ''}`);
      load();
    } catch (e) {
      show(status, h('p', { class: 'error', role: 'alert' }, `Could not recover: ${e.message}`));
    } finally {
      recoverButton.disabled = false;
    }
  });

  show(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/subscriptions' }, '← Subscriptions')),
    h('div', { class: 'page-head' }, title, subStatus),
    subHealth,
    statsSlot,
    h('section', { class: 'card', 'aria-labelledby': 'notifications-title' },
      h('div', { class: 'section-head' },
        h('h2', { id: 'notifications-title' }, 'Notifications'),
        h('div', { class: 'inline' }, h('label', { for: 'status-filter' }, 'Status'), filter, refresh)),
      recover,
      status, list, pager));

  async function loadSubscription() {
    try {
      const sub = await api.get(base, undefined, { signal: ctx.signal });
      if (!ctx.alive()) return;
      title.textContent = sub.uri;
      show(subStatus, badge(sub.status));
      subHealth.className = healthClass(sub.health);
      subHealth.textContent = `Delivery: ${healthWords(sub.health)}`;
    } catch (e) {
      if (!ctx.alive()) return;
      show(status, h('p', { class: 'error', role: 'alert' }, e.status === 404
        ? 'This subscription does not exist (any more): go back to the subscriptions.'
        : `Could not load the subscription: ${e.message}`));
    }
  }

  // The chart is drawn for the room it has: again when that changes (a phone turned).
  let lastStats = null;
  let drawnFor = 0;
  const draw = () => {
    drawnFor = statsSlot.clientWidth;
    showIfChanged(statsSlot, chart(lastStats, drawnFor - 42));
  };
  const resized = new ResizeObserver(() => {
    if (!ctx.alive()) { resized.disconnect(); return; }
    if (lastStats && Math.abs(statsSlot.clientWidth - drawnFor) > 16) draw();
  });
  resized.observe(statsSlot);

  async function loadStats() {
    const signal = statsRequest();
    try {
      const stats = await api.get(`${base}/stats`, undefined, { signal });
      if (signal.aborted) return;
      lastStats = stats;
      draw();
    } catch (e) {
      if (!signal.aborted) show(statsSlot, h('p', { class: 'error', role: 'alert' }, `Could not load the chart: ${e.message}`));
    }
  }

  /** Loads the list; `quietly` (polling): no spinner, and the list is left as it is when nothing changed. */
  async function load(quietly = false) {
    const signal = listRequest();
    if (!quietly) show(status, h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Loading notifications…');
    let result;
    try {
      result = await api.get(`${base}/notifications`, { page, size: SIZE, status: statusFilter || undefined }, { signal });
    } catch (e) {
      if (signal.aborted) return;
      show(status, h('p', { class: 'error', role: 'alert' }, `Could not load the notifications: ${e.message}`));
      return;
    }
    if (signal.aborted) return;
    show(status);
    pending = result.content.some((n) => n.status === 'PENDING');
    if (result.totalElements === 0) {
      showIfChanged(list, h('div', { class: 'empty' },
        h('h2', {}, statusFilter ? `No ${statusFilter.toLowerCase()} notifications` : 'No notifications yet'),
        h('p', {}, statusFilter
          ? 'Choose "All" to see the others.'
          : 'They appear here as soon as an event matches one of this subscription\'s filters '
            + '(on AWS, events arrive on the events queue; locally, POST them to /prod/events).')));
      show(pager);
      return;
    }
    showIfChanged(list, table(result.content));
    renderPager(result);
  }

  function table(rows) {
    return h('table', { class: 'notifications' },
      h('thead', {}, h('tr', {},
        ['Created', 'Event', 'Status', 'Attempts', 'Last HTTP status', 'Next attempt', ''].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((n) => h('tr', { 'data-uuid': n.uuid, 'data-status': n.status },
        h('td', { 'data-label': 'Created' }, time(n.createdDateTime)),
        h('td', { 'data-label': 'Event' }, h('code', {}, n.event)),
        h('td', { 'data-label': 'Status' }, badge(n.status)),
        h('td', { 'data-label': 'Attempts' }, String(n.attempts)),
        h('td', { 'data-label': 'Last HTTP status' }, n.lastHttpStatus ?? (n.lastCode ? code(n.lastCode) : '—')),
        h('td', { 'data-label': 'Next attempt' }, n.nextAttemptTime ? `${time(n.nextAttemptTime)} (${relative(n.nextAttemptTime)})` : '—'),
        h('td', {}, h('a', { class: 'button', href: `#/subscriptions/${api.enc(id)}/notifications/${api.enc(n.uuid)}`,
          'aria-label': `Open notification ${n.uuid}` }, 'Open'))))));
  }

  function renderPager(result) {
    const count = `${result.totalElements} notification${result.totalElements === 1 ? '' : 's'}`;
    if (result.totalPages <= 1) { showIfChanged(pager, h('span', { class: 'muted' }, count)); return; }
    const prev = h('button', { type: 'button', disabled: result.first }, 'Newer');
    const next = h('button', { type: 'button', disabled: result.last }, 'Older');
    // Kept as they are when unchanged: the buttons shown act on the same `page`.
    prev.addEventListener('click', () => { page -= 1; load(); });
    next.addEventListener('click', () => { page += 1; load(); });
    showIfChanged(pager, prev, h('span', {}, `Page ${result.number + 1} of ${result.totalPages} (${count})`), next);
  }

  // While any is PENDING, every 2 s; otherwise every 10 s (new ones arrive).
  let ticks = 0;
  ctx.every(2000, () => {
    ticks += 1;
    return pending || ticks % 5 === 0 ? Promise.all([load(true), loadStats(), loadSubscription()]) : null;
  });
  loadSubscription();
  loadStats();
  load();
}

function inputValue(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}
