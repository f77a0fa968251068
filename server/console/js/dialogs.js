// Modal dialogs (<dialog> shown with showModal(): the rest of the page is
// inert). Focus moves into the dialog, Tab and Shift+Tab cycle inside it,
// Escape closes it, and focus returns to what had it before.
//
// actionDialog() asks for what a decision needs (a reason, and options such
// as override or force), sends it with the caller's submit function and
// shows a refusal inside the dialog: the message, and each field violation
// under the field it names; the dialog stays open until the call succeeds
// or the user cancels.

import {ApiError} from './api.js';
import {button, field, h, setFieldError, uid} from './dom.js';

function focusable(root) {
  return Array.from(root.querySelectorAll(
      'button, [href], input, select, textarea, [tabindex]:not([tabindex="-1"])'))
      .filter((el) => !el.disabled && !el.hidden && el.offsetParent !== null);
}

// Opens a modal with `content` (nodes) and returns {dialog, close}. close()
// removes it and gives focus back. onClose runs once, however it closes.
export function openModal({title, content, onClose, className}) {
  const opener = document.activeElement;
  const titleId = uid('dlg');
  const dialog = h('dialog', {
    class: className || 'modal',
    'aria-labelledby': titleId,
  }, h('h2', {id: titleId}, title), content);
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    if (dialog.open) dialog.close();
    dialog.remove();
    if (opener && opener.isConnected && typeof opener.focus === 'function') {
      opener.focus();
    }
    if (onClose) onClose();
  };
  dialog.addEventListener('cancel', (event) => {
    event.preventDefault();  // Escape: close our way (focus goes back)
    close();
  });
  dialog.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') {
      event.preventDefault();
      close();
      return;
    }
    if (event.key !== 'Tab') return;
    const items = focusable(dialog);
    if (items.length === 0) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first.focus();
    }
  });
  document.body.appendChild(dialog);
  dialog.showModal();
  const first = focusable(dialog).find((el) => el.matches('input, textarea, select')) ||
      focusable(dialog)[0];
  if (first) first.focus();
  return {dialog, close};
}

// A decision dialog. fields: [{name, label, kind: 'textarea'|'checkbox'|
// 'input', required, hint, value}]. submit(values) -> Promise (the API
// call). Resolves with submit's result, or null when cancelled.
export function actionDialog({title, description, fields, confirmLabel,
                              danger, submit}) {
  return new Promise((resolve) => {
    const controls = {};
    const rows = [];
    for (const f of fields) {
      let built;
      if (f.kind === 'checkbox') {
        built = field(f.label, 'input', {type: 'checkbox', name: f.name,
                                         hint: f.hint, checked: f.value});
      } else {
        built = field(f.label, f.kind || 'textarea', {
          name: f.name, hint: f.hint, required: f.required,
          'aria-required': f.required ? 'true' : null,
          rows: f.kind === 'textarea' || !f.kind ? 3 : null,
          value: f.value || '',
          autocomplete: 'off',
        });
      }
      controls[f.name] = {spec: f, control: built.control};
      rows.push(built.row);
    }
    const errorBox = h('div', {class: 'error-box', role: 'alert', hidden: true});
    const form = h('form', {class: 'dialog-form', novalidate: true},
        description ? h('p', {class: 'dialog-description'}, description) : null,
        rows, errorBox,
        h('div', {class: 'dialog-buttons'},
            h('button', {type: 'submit', class: danger ? 'danger' : 'primary'},
                confirmLabel || title),
            button('Cancel', () => modal.close())));
    let settled = false;
    let busy = false;
    const modal = openModal({
      title,
      content: form,
      onClose: () => {
        if (!settled) resolve(null);
      },
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (busy) return;
      errorBox.hidden = true;
      const values = {};
      let missing = null;
      for (const [name, {spec, control}] of Object.entries(controls)) {
        setFieldError(control, '');
        if (spec.kind === 'checkbox') {
          values[name] = control.checked;
        } else {
          values[name] = control.value.trim();
          if (spec.required && !values[name]) {
            setFieldError(control, `${spec.label} is required.`);
            missing = missing || control;
          }
        }
      }
      if (missing) {
        missing.focus();
        return;
      }
      const submitButton = form.querySelector('button[type=submit]');
      busy = true;
      submitButton.setAttribute('aria-disabled', 'true');
      form.setAttribute('aria-busy', 'true');
      try {
        const result = await submit(values);
        settled = true;
        modal.close();
        resolve(result);
      } catch (e) {
        showError(errorBox, e, (fieldPath) => {
          const name = fieldPath.split('.').pop().replace(/\[.*$/, '');
          const camel = name.replace(/_([a-z])/g, (m, c) => c.toUpperCase());
          return controls[camel] ? controls[camel].control : null;
        });
      } finally {
        busy = false;
        submitButton.removeAttribute('aria-disabled');
        form.removeAttribute('aria-busy');
      }
    });
  });
}

// Puts an error in `box` (shown, role=alert): the message, and each field
// violation either under its control (controlFor(fieldPath) -> control
// built by field()) or listed in the box.
export function showError(box, error, controlFor = () => null) {
  box.textContent = '';
  const message = error instanceof ApiError || (error && error.message) ?
      error.message : String(error);
  box.appendChild(h('p', null, message));
  if (error instanceof ApiError) {
    const others = [];
    let firstControl = null;
    for (const v of error.fieldViolations) {
      const control = controlFor(v.field || '');
      if (control) {
        setFieldError(control, v.description || 'Not accepted.');
        firstControl = firstControl || control;
      } else {
        others.push(v);
      }
    }
    if (others.length) {
      box.appendChild(h('ul', null, others.map((v) => h('li', null,
          h('code', null, v.field || 'request'), ': ', v.description || ''))));
    }
    if (error.reason) {
      box.appendChild(h('p', {class: 'hint'}, `Reason code: ${error.reason}`));
    }
    if (firstControl) firstControl.focus();
  }
  box.hidden = false;
}
