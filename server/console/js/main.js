// The console's start: signs in (GET /ui/session, with the token from
// sessionStorage when there is one), then routes. A 401 from any call
// brings the sign-in form back.

import {ApiError, api, onUnauthenticated} from './api.js';
import {clear, h, replace} from './dom.js';
import {Router, route} from './router.js';
import {clearToken, getToken, sessionInfo, setSessionInfo, setToken} from './session.js';
import {announce} from './status.js';
import {datasetPage, datasetsList} from './pages/datasets.js';
import {jobPage} from './pages/job.js';
import {jobsPage} from './pages/jobs.js';
import {nodesPage} from './pages/nodes.js';
import {planPage} from './pages/plan.js';

route('/backfills', 'jobs', jobsPage);
route('/backfills/:id', 'job', jobPage);
route('/backfills/:id/partitions/:dataset/:partition', 'job', jobPage);
route('/datasets', 'datasets', datasetsList);
route('/datasets/:name', 'dataset', datasetPage);
route('/datasets/:name/partitions/:partition', 'dataset', datasetPage);
route('/plan', 'plan', planPage);
route('/nodes', 'nodes', nodesPage);

const main = document.getElementById('main');
const signin = document.getElementById('signin');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
let router = null;

function notFound(container) {
  replace(container, h('h1', {tabindex: '-1'}, 'Not found'),
      h('p', null, 'No page of the console has this address. ',
          h('a', {href: '#/backfills'}, 'Go to the jobs.')));
  container.querySelector('h1').focus();
}

function markNav(parsed) {
  const name = parsed ? parsed.route.name : '';
  const section = {jobs: 'jobs', job: 'jobs', datasets: 'datasets', dataset: 'datasets',
                   plan: 'plan', nodes: 'nodes'}[name];
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.section === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function showWho() {
  const info = sessionInfo();
  const text = info.authentication ?
    `${info.principal || 'signed in'}${(info.roles || []).length ?
      ` (${info.roles.join(', ')})` : ''}` : 'authentication off';
  const out = h('span', {class: 'principal'}, text);
  const items = [out];
  if (info.authentication) {
    const signOut = h('button', {type: 'button', class: 'link-button'}, 'Sign out');
    signOut.addEventListener('click', () => {
      clearToken();
      showSignIn('Signed out.');
    });
    items.push(signOut);
  }
  replace(who, ...items);
}

function startApp() {
  signin.hidden = true;
  main.hidden = false;
  nav.hidden = false;
  showWho();
  if (!router) {
    router = new Router(main, {onNotFound: notFound, onRoute: markNav});
  } else {
    router.stop();
  }
  router.start();
}

function showSignIn(message) {
  if (router) router.stop();
  main.hidden = true;
  nav.hidden = true;
  clear(who);
  signin.hidden = false;
  const status = document.getElementById('signin-status');
  status.textContent = message || '';
  status.hidden = !message;
  const input = document.getElementById('token');
  input.value = '';
  input.focus();
  document.title = 'Sign in · backfilld';
}

async function checkSession() {
  try {
    const info = await api.session();
    setSessionInfo(info);
    return null;
  } catch (e) {
    return e;
  }
}

onUnauthenticated(() => {
  if (!signin.hidden) return;  // already asked (several calls were refused)
  const hadToken = Boolean(getToken());
  clearToken();
  showSignIn(hadToken ? 'The token was not accepted (wrong, revoked or expired). ' +
      'Sign in again.' : '');
});

document.getElementById('signin-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = document.getElementById('token');
  const token = input.value.trim();
  const status = document.getElementById('signin-status');
  if (!token) {
    status.textContent = 'Enter your token.';
    status.hidden = false;
    input.focus();
    return;
  }
  setToken(token);
  const error = await checkSession();
  if (error) {
    clearToken();
    status.textContent = error.status === 401 ?
      'The token was not accepted (wrong, revoked or expired).' : error.message;
    status.hidden = false;
    input.select();
    return;
  }
  announce(`Signed in as ${sessionInfo().principal || 'you'}.`);
  startApp();
});

async function boot() {
  const error = await checkSession();
  if (!error) {
    startApp();
    return;
  }
  if (error instanceof ApiError && error.status === 401) return;  // sign-in shown
  showSignIn(`The daemon could not be reached: ${error.message}`);
}

boot();
