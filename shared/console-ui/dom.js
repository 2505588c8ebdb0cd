// DOM helpers. Every value is put into the page as text (text nodes,
// textContent, attribute values): nothing is ever parsed as markup, so a
// callback that answers with HTML shows as that HTML's text. The page's
// Content-Security-Policy requires Trusted Types, so assigning markup as a string
// would throw anyway.

const SVG_NS = 'http://www.w3.org/2000/svg';

function set(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.setAttribute('class', value);
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'href' && !/^(#|\.|https?:)/.test(String(value))) {
      throw new Error(`refusing link ${value}`);
    } else if (typeof value === 'boolean') {
      el[key] = value; // disabled, required, hidden, selected

    } else {
      el.setAttribute(key, String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** h('p', {class: 'x'}, 'text', child...): an HTML element. */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  set(el, props);
  append(el, children);
  return el;
}

/** An SVG element (for the chart). */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/** Replaces an element's children. */
export function show(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/**
 * Shows `nodes` in `el` unless it already shows equal ones: a poll that
 * brings nothing new leaves the page, its focus and selection as they are.
 */
export function showIfChanged(el, ...nodes) {
  const shown = el.childNodes;
  if (shown.length === nodes.length && nodes.every((node, i) => shown[i].isEqualNode(node))) return;
  show(el, ...nodes);
}

/** A short message in the polite live region. */
export function toast(text) {
  const el = document.getElementById('toast');
  show(el, text);
  el.classList.add('visible');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove('visible'), 4000);
}

/** A modal confirmation (a <dialog>: keyboard and focus handled by the browser). */
export function confirmDialog({ title, body, confirm, danger = false }) {
  return new Promise((resolve) => {
    const yes = h('button', { type: 'button', class: danger ? 'danger' : 'primary', value: 'yes' }, confirm);
    const no = h('button', { type: 'button', value: 'no' }, 'Cancel');
    const dialog = h('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-title' },
      h('h2', { id: 'confirm-title' }, title),
      h('p', {}, body),
      h('div', { class: 'actions' }, no, yes));
    const close = (answer) => { dialog.close(); dialog.remove(); resolve(answer); };
    yes.addEventListener('click', () => close(true));
    no.addEventListener('click', () => close(false));
    dialog.addEventListener('cancel', (e) => { e.preventDefault(); close(false); });
    document.body.append(dialog);
    dialog.showModal();
    no.focus();
  });
}

/** A status badge. */
export function badge(status) {
  const value = String(status || 'UNKNOWN');
  return h('span', { class: `badge badge-${value.toLowerCase().replace(/[^a-z]/g, '')}` }, value);
}
