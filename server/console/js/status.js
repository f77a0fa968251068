// Announcements for screen readers (a polite live region in index.html)
// and page-level errors (role=alert).

import {h, replace} from './dom.js';

let clearTimer = 0;

// Says `text` through the live region, and shows it briefly.
export function announce(text) {
  const region = document.getElementById('announcer');
  if (!region) return;
  region.textContent = '';
  // A new text node after clearing makes screen readers read it again.
  setTimeout(() => {
    region.textContent = text;
  }, 50);
  clearTimeout(clearTimer);
  clearTimer = setTimeout(() => {
    region.textContent = '';
  }, 8000);
}

// Replaces the page with an error: `title` and the API's message.
export function showPageError(container, error, title) {
  replace(container, 
      h('h1', {tabindex: '-1'}, title),
      h('div', {class: 'error-box', role: 'alert'},
          h('p', null, error.message || String(error)),
          error.reason ? h('p', {class: 'hint'}, `Reason code: ${error.reason}`) : null),
      h('p', null, h('a', {href: '#/backfills'}, 'Back to the jobs')));
}
