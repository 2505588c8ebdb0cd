// The event catalogue beside the subscription form: every kind of
// notification the service sends (GET /event-types), each with when it is
// sent, an example body and its JSON Schema, so a developer sees what will
// arrive before subscribing.

import { h, show } from './dom.js';
import * as api from './api.js';

const pretty = (value) => JSON.stringify(value, null, 2);

function kind(entry) {
  return h('details', { class: 'event-type', 'data-kind': entry.kind },
    h('summary', {}, h('code', {}, entry.kind)),
    h('p', { class: 'hint' }, entry.description),
    h('h3', {}, 'Example'),
    h('pre', { class: 'example' }, pretty(entry.example)),
    h('details', { class: 'schema' },
      h('summary', {}, 'JSON Schema'),
      h('pre', {}, pretty(entry.schema))));
}

/** The catalogue's panel; it loads itself (a failure is said in it). */
export function catalogue() {
  const list = h('div', { class: 'event-types-list', role: 'status', 'aria-live': 'polite' },
    h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Loading the event types…');
  const el = h('aside', { class: 'card event-types', 'aria-labelledby': 'event-types-title' },
    h('h2', { id: 'event-types-title' }, 'Event types'),
    h('p', { class: 'hint' }, 'What a subscription receives: each kind with an example and its JSON Schema (also GET /event-types).'),
    list);
  api.get('event-types').then(({ eventTypes }) => {
    list.removeAttribute('role');
    show(list, eventTypes.map(kind));
  }, (e) => {
    show(list, h('p', { class: 'error' }, `Could not read the event types: ${e.message}`));
  });
  return el;
}
