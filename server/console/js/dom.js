// DOM helpers. Every element of the console is built here with
// createElement and textContent: data from the API is never parsed as
// markup, and no style attribute is ever written (the daemon's
// Content-Security-Policy allows only its own stylesheet).

// h('a', {href: '#/x', class: 'link', onclick: fn}, 'text', child, ...):
// an element with attributes, event listeners (on*) and children (strings
// become text nodes; null, undefined and false are skipped; arrays are
// flattened).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith('on') && typeof value === 'function') {
        el.addEventListener(key.slice(2), value);
      } else if (key === 'class') {
        el.className = value;
      } else if (key === 'text') {
        el.textContent = value;
      } else if (key === 'dataset') {
        Object.assign(el.dataset, value);
      } else if (key === 'value' && 'value' in el) {
        el.value = value;
      } else if (key === 'checked' || key === 'disabled' ||
                 key === 'selected' || key === 'required' ||
                 key === 'hidden' || key === 'open') {
        el[key] = Boolean(value);
      } else if (key === 'style') {
        throw new Error('h(): no style attributes (CSP); use a class');
      } else {
        el.setAttribute(key, value === true ? '' : String(value));
      }
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) {
      append(el, child);
    } else if (child instanceof Node) {
      el.appendChild(child);
    } else {
      el.appendChild(document.createTextNode(String(child)));
    }
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  return append(el, children);
}

// A link to a route of the console (a hash route).
export function link(route, text, attrs = {}) {
  return h('a', {...attrs, href: route}, text);
}

// A table: columns [{label, cell(row) -> node|string, class}], rows.
// Each cell carries its column's label (data-label) for the narrow-screen
// layout, where rows become cards.
export function table(columns, rows, {caption, className, empty} = {}) {
  const head = h('thead', null, h('tr', null, columns.map(
      (c) => h('th', {scope: 'col', class: c.class}, c.label))));
  const body = h('tbody');
  for (const row of rows) {
    body.appendChild(h('tr', null, columns.map((c) => h(
        'td', {class: c.class, 'data-label': c.label}, c.cell(row)))));
  }
  if (rows.length === 0 && empty) {
    body.appendChild(h('tr', null,
        h('td', {colspan: columns.length, class: 'empty'}, empty)));
  }
  return h('div', {class: 'table-wrap'},
      h('table', {class: className || 'data'},
          caption ? h('caption', null, caption) : null, head, body));
}

// A description list from [[term, value], ...]; pairs whose value is
// null, undefined or '' are left out.
export function dl(pairs, className = 'facts') {
  const list = h('dl', {class: className});
  for (const [term, value] of pairs) {
    if (value === null || value === undefined || value === '') continue;
    list.appendChild(h('div', null, h('dt', null, term), h('dd', null, value)));
  }
  return list;
}

// A section with a heading (h2 by default) whose id labels it.
let sectionCounter = 0;
export function section(title, ...children) {
  const id = `sec-${++sectionCounter}`;
  return h('section', {class: 'panel', 'aria-labelledby': id},
      h('h2', {id}, title), ...children);
}

// A button that runs `action`; clicks while it runs are ignored. It is
// marked aria-disabled rather than disabled, so that it keeps focus (a
// disabled button loses it, and a dialog it opened could not give it back).
export function button(text, action, attrs = {}) {
  const b = h('button', {type: 'button', ...attrs}, text);
  let busy = false;
  b.addEventListener('click', async (event) => {
    if (busy) return;
    busy = true;
    b.setAttribute('aria-disabled', 'true');
    try {
      await action(event);
    } finally {
      busy = false;
      b.removeAttribute('aria-disabled');
    }
  });
  return b;
}

// Unique ids for label/control pairs.
let idCounter = 0;
export function uid(prefix = 'id') {
  return `${prefix}-${++idCounter}`;
}

// A labelled form control: returns {row, control}. kind: 'input' (attrs
// type etc.), 'textarea' or 'select' (options: [[value, text]]).
export function field(label, kind = 'input', attrs = {}, options = []) {
  const id = attrs.id || uid('f');
  const hintId = attrs.hint ? `${id}-hint` : null;
  const errorId = `${id}-error`;
  const {hint, ...rest} = attrs;
  const control = h(kind, {
    ...rest,
    id,
    'aria-describedby': [hintId, errorId].filter(Boolean).join(' '),
  });
  for (const [value, text] of options) {
    control.appendChild(h('option', {value}, text));
  }
  const error = h('p', {class: 'field-error', id: errorId, hidden: true});
  const isCheck = kind === 'input' &&
      (rest.type === 'checkbox' || rest.type === 'radio');
  const labelEl = h('label', {for: id}, label);
  const row = h('div', {class: isCheck ? 'field check' : 'field'},
      isCheck ? [control, labelEl] : [labelEl, control],
      hint ? h('p', {class: 'hint', id: hintId}, hint) : null, error);
  control.fieldError = error;
  // An error shown under the control goes once the value is edited.
  const clear = () => {
    if (control.hasAttribute('aria-invalid')) setFieldError(control, '');
  };
  control.addEventListener('input', clear);
  control.addEventListener('change', clear);
  return {row, control};
}

// Shows (or with '' hides) the error text under a control built by field().
export function setFieldError(control, text) {
  const error = control.fieldError;
  if (!error) return;
  error.textContent = text || '';
  error.hidden = !text;
  if (text) {
    control.setAttribute('aria-invalid', 'true');
  } else {
    control.removeAttribute('aria-invalid');
  }
}
