// The console (server/console/) in a real headless Chromium against a real
// backfilld with tokens, as a viewer and then as an approver, on one job
// that waits for approval:
//
//   node console_test.mjs --url http://127.0.0.1:PORT/ui/ --job bf-1 \
//       --viewer-token T --approver-token T --expect-partitions N \
//       --shots DIR [--timeout-seconds 240]
//
// As the viewer: sign in; the jobs list shows the job; its page has a
// partition grid of exactly N cells (one per partition per dataset of the
// job) and no decision (approve, cancel, pause, resume, retry, roll back,
// confirm); an approval sent from the page with the viewer's token is
// refused 403 with a google.rpc.Status whose ErrorInfo reason is
// ROLE_REQUIRED, and changes nothing; a partition's cell opens its panel
// with what ExplainPartition says; the datasets and plan pages show. As the
// approver (after signing out): the job offers Approve; the dialog, driven
// by the keyboard, asks for a reason and sends it; the job leaves
// AWAITING_APPROVAL and ends SUCCEEDED (polled on the API, up to 60 s), and
// its page says so; a published partition's panel lists the checks
// ExplainPartition gives its version, each outcome in words. Throughout: no console error, no uncaught exception, no
// request to another origin, and no refused request but the first session
// check before sign-in (401) and the approval provoked as the viewer (403).
//
// Prints one "ok N - ..." line per check passed; on the first failure
// prints "FAIL - ..." with what was seen (and saves 99-failure.png), and
// exits 1. Exits 0 only when every check passed. Screenshots are
// 01-jobs.png, 02-job.png, ... in --shots.

import {parseArgs} from 'node:util';
import {ConsoleDriver} from './lib/console_driver.mjs';

const {values: args} = parseArgs({
  options: {
    'url': {type: 'string'},
    'job': {type: 'string'},
    'viewer-token': {type: 'string'},
    'approver-token': {type: 'string'},
    'expect-partitions': {type: 'string'},
    'shots': {type: 'string'},
    'timeout-seconds': {type: 'string', default: '240'},
  },
  strict: true,
});

function usage(message) {
  console.error(`console_test.mjs: ${message}\n` +
      'usage: node console_test.mjs --url http://127.0.0.1:PORT/ui/ --job bf-1 ' +
      '--viewer-token T --approver-token T --expect-partitions N --shots DIR ' +
      '[--timeout-seconds 240]');
  process.exit(2);
}

for (const name of ['url', 'job', 'viewer-token', 'approver-token',
  'expect-partitions', 'shots']) {
  if (!args[name]) usage(`--${name} is required`);
}
const URL_ = args.url;
const ORIGIN = new URL(URL_).origin;
const JOB = args.job;
const VIEWER_TOKEN = args['viewer-token'];
const APPROVER_TOKEN = args['approver-token'];
const EXPECTED_CELLS = Number(args['expect-partitions']);
if (!Number.isInteger(EXPECTED_CELLS) || EXPECTED_CELLS <= 0) {
  usage(`--expect-partitions must be a positive integer, not ${args['expect-partitions']}`);
}
const TIMEOUT_SECONDS = Number(args['timeout-seconds']);

const AWAITING = 'BACKFILL_STATE_AWAITING_APPROVAL';
const SUCCEEDED = 'BACKFILL_STATE_SUCCEEDED';
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'ROLLED_BACK',
  'VALIDATION_FAILED', 'DOWNSTREAM_UNHEALTHY'].map((s) => `BACKFILL_STATE_${s}`));
const TOKEN_KEY = 'backfilld.console.token';
// Buttons of the decisions on a job (actions.js), by their words.
const DECISION_WORDS = /\b(approve|cancel|pause|resume|retry|roll ?back|confirm)/i;
const VIEWER_REASON = 'a viewer tries to approve';
const APPROVER_REASON = 'totals checked against the finance export (console test)';
const WAIT_MS = 30000;

// --- Reporting -------------------------------------------------------------

let passed = 0;
let current = 'starting';
function ok(text) {
  passed += 1;
  console.log(`ok ${passed} - ${text}`);
}
function expect(condition, message) {
  if (!condition) throw new Error(message);
}
// Runs a check: `what` names it in the failure report.
async function step(what, fn) {
  current = what;
  return fn();
}

// Waits for `fn` (run in the page with `arg`) to return a truthy value;
// on timeout, throws with `describe` (run in the page) as what was seen.
async function waitInPage(page, what, fn, arg, describe, timeout = WAIT_MS) {
  try {
    const handle = await page.waitForFunction(fn, {timeout, polling: 100}, arg);
    return await handle.jsonValue();
  } catch (e) {
    let seen = '';
    try {
      seen = describe ? await page.evaluate(describe, arg) :
        await page.evaluate(() => {
          const main = document.getElementById('main');
          return (main ? main.innerText : document.body.innerText).slice(0, 1500);
        });
    } catch (e2) {
      seen = `(cannot read the page: ${e2.message})`;
    }
    throw new Error(`timed out after ${timeout} ms waiting for ${what}; ` +
        `${e.message.split('\n')[0]}\nseen: ${typeof seen === 'string' ? seen :
          JSON.stringify(seen)}`);
  }
}

// --- The API, from Node (not the browser) ----------------------------------

async function apiGet(path, token) {
  const response = await fetch(ORIGIN + path, {
    headers: {Accept: 'application/json', Authorization: `Bearer ${token}`},
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status}: ${text}`);
  return JSON.parse(text);
}

const getJob = (token) => apiGet(
    `/v1/backfills/${encodeURIComponent(JOB)}?view=BACKFILL_VIEW_BASIC`, token);

// --- In the page -------------------------------------------------------------

// The texts of the visible buttons in #main (and in an open dialog).
function visibleButtons(page) {
  return page.evaluate(() => Array.from(document.querySelectorAll('#main button'))
      .filter((b) => b.offsetParent !== null)
      .map((b) => b.textContent.trim()));
}

// The texts of the decision buttons (the .actions group of the job page).
function decisionButtons(page) {
  return page.evaluate(() => Array.from(
      document.querySelectorAll('#main .actions[role=group] button'))
      .map((b) => b.textContent.trim()));
}

// Waits until the job page of JOB shows, its badge has `stateText`, and
// its grids are built ("N partitions in D datasets.").
async function waitJobPage(page, stateText) {
  await waitInPage(page, `the page of ${JOB} in state "${stateText}"`,
      ({job, stateText: want}) => {
        const main = document.getElementById('main');
        if (!main || main.hidden) return false;
        const h1 = main.querySelector('h1');
        const badge = main.querySelector('.title-badge .badge');
        return Boolean(h1 && h1.textContent === `Job ${job}` && badge &&
                       badge.textContent === want);
      }, {job: JOB, stateText});
  return waitInPage(page, 'the partition grid to be loaded',
      () => {
        const status = Array.from(document.querySelectorAll('#main section.panel'))
            .filter((s) => (s.querySelector('h2') || {}).textContent === 'Partitions')
            .map((s) => s.querySelector('p.hint'))[0];
        const text = status ? status.textContent : '';
        return /^[\d,]+ partitions? in \d+ datasets?\./.test(text) ? text : false;
      }, null);
}

// Signs in with `token` through the form as it stands (the form may still
// show "Signed out."): waits until the console starts, or throws with the
// form's message.
async function signInWithForm(page, token) {
  await page.waitForSelector('#token', {visible: true, timeout: WAIT_MS});
  await page.$eval('#token', (el) => {
    el.value = '';
  });
  await page.type('#token', token);
  await page.click('#signin-form button[type=submit]');
  await waitInPage(page, 'the console to start after sign-in', () => {
    const main = document.getElementById('main');
    const signin = document.getElementById('signin');
    const status = document.getElementById('signin-status');
    if (main && !main.hidden && signin.hidden && main.querySelector('h1')) return true;
    return Boolean(status && !status.hidden && status.textContent &&
                   status.textContent !== 'Signed out.');
  }, null, () => document.getElementById('signin-status').textContent);
  const refused = await page.$eval('#signin',
      (el) => (el.hidden ? '' : document.getElementById('signin-status').textContent));
  expect(!refused, `sign-in refused: ${refused}`);
}

// --- The test ------------------------------------------------------------------

async function run(driver) {
  const page = driver.page;

  // Who the tokens are, and the job, as the API says.
  const viewer = await apiGet('/ui/session', VIEWER_TOKEN);
  const approver = await apiGet('/ui/session', APPROVER_TOKEN);
  await step('the tokens and the job', async () => {
    expect(viewer.authentication === true,
        `the daemon does not ask for tokens: ${JSON.stringify(viewer)}`);
    expect(!(viewer.allowedMethods || []).includes('ApproveBackfill'),
        `the viewer token may call ApproveBackfill: ${JSON.stringify(viewer)}`);
    expect((approver.allowedMethods || []).includes('ApproveBackfill'),
        `the approver token may not call ApproveBackfill: ${JSON.stringify(approver)}`);
    const job = await getJob(VIEWER_TOKEN);
    expect(job.state === AWAITING,
        `${JOB} is ${job.state}, not ${AWAITING}, at the start`);
    ok(`${JOB} awaits approval; viewer ${viewer.principal} (${viewer.roles.join(', ')}), ` +
       `approver ${approver.principal} (${approver.roles.join(', ')})`);
  });

  // --- As the viewer ---
  await step('sign in as the viewer', async () => {
    await driver.open(URL_);
    expect(await driver.signInShown(), 'the sign-in form is not shown before a token is given');
    ok('the sign-in form shows before a token is given');
    await driver.signIn(VIEWER_TOKEN);
    const who = await page.$eval('#who', (el) => el.textContent);
    expect(who.includes(viewer.principal) && who.includes('viewer'),
        `the header says "${who}", not the viewer ${viewer.principal} (viewer)`);
    ok(`signed in as the viewer: the header says "${who.replace('Sign out', '').trim()}"`);
  });

  await step('the jobs list (viewer)', async () => {
    await driver.route('#/backfills', {text: JOB});
    const row = await waitInPage(page, `${JOB} in the jobs table`, (job) => {
      const link = Array.from(document.querySelectorAll('#main table a'))
          .find((a) => a.textContent === job);
      if (!link) return false;
      const tr = link.closest('tr');
      const badge = tr.querySelector('.badge');
      return {href: link.getAttribute('href'), state: badge ? badge.textContent : ''};
    }, JOB);
    expect(row.href === `#/backfills/${JOB}`, `the job's link goes to ${row.href}`);
    expect(row.state === 'awaiting approval',
        `the jobs list shows ${JOB} as "${row.state}", not "awaiting approval"`);
    ok(`the jobs list shows ${JOB}, awaiting approval`);
    await driver.screenshot('01-jobs', {fullPage: true});
  });

  await step('the job page (viewer)', async () => {
    // Through the list's link, as a user would.
    await page.click(`#main table a[href="#/backfills/${JOB}"]`);
    const status = await waitJobPage(page, 'awaiting approval');
    const grids = await page.evaluate(() => Array.from(
        document.querySelectorAll('#main [role=grid]')).map((g) => ({
      label: g.getAttribute('aria-label'),
      cells: g.querySelectorAll('[role=gridcell]').length,
    })));
    const cells = await page.$$eval('#main [role=gridcell]', (els) => els.length);
    expect(cells === EXPECTED_CELLS,
        `the partition grid has ${cells} cells, not ${EXPECTED_CELLS} ` +
        `(grids: ${JSON.stringify(grids)}; "${status}")`);
    expect(grids.reduce((n, g) => n + g.cells, 0) === cells, 'cells outside the grids');
    ok(`the job page's partition grid has exactly ${cells} cells ` +
       `(${grids.map((g) => `${g.label}: ${g.cells}`).join('; ')})`);

    const decisions = await decisionButtons(page);
    const buttons = await visibleButtons(page);
    const offending = buttons.filter((b) => DECISION_WORDS.test(b));
    expect(decisions.length === 0 && offending.length === 0,
        `the viewer is shown decisions: group ${JSON.stringify(decisions)}, ` +
        `buttons ${JSON.stringify(offending)}`);
    ok(`no decision is shown to the viewer (buttons on the page: ${
      JSON.stringify(buttons)})`);
    await driver.screenshot('02-job', {fullPage: true});
  });

  await step('an approval from the page as the viewer', async () => {
    const answer = await page.evaluate(async ({job, reason, key}) => {
      const token = sessionStorage.getItem(key) || '';
      const response = await fetch(`/v1/backfills/${encodeURIComponent(job)}:approve`, {
        method: 'POST',
        headers: {'Accept': 'application/json', 'Content-Type': 'application/json',
                  'Authorization': `Bearer ${token}`},
        body: JSON.stringify({reason}),
        credentials: 'omit',
        cache: 'no-store',
      });
      return {token, status: response.status,
              contentType: response.headers.get('content-type') || '',
              body: await response.text()};
    }, {job: JOB, reason: VIEWER_REASON, key: TOKEN_KEY});
    expect(answer.token === VIEWER_TOKEN, 'the page does not hold the viewer\'s token');
    expect(answer.status === 403,
        `POST /v1/backfills/${JOB}:approve as the viewer: HTTP ${answer.status} ` +
        `${answer.body}`);
    let status;
    try {
      status = JSON.parse(answer.body);
    } catch (e) {
      throw new Error(`the 403's body is not JSON (${answer.contentType}): ${answer.body}`);
    }
    const info = (status.details || []).find((d) =>
      (d['@type'] || '') === 'type.googleapis.com/google.rpc.ErrorInfo');
    expect(status.code === 7 && typeof status.message === 'string' && status.message,
        `the 403's body is no google.rpc.Status of PERMISSION_DENIED: ${answer.body}`);
    expect(info && info.reason === 'ROLE_REQUIRED' && info.domain === 'backfilld',
        `the 403's ErrorInfo is not ROLE_REQUIRED of backfilld: ${answer.body}`);
    const meta = info.metadata || {};
    expect(meta.method === 'ApproveBackfill' && meta.required_role === 'approver' &&
           meta.principal === viewer.principal,
    `the ErrorInfo's metadata does not name ApproveBackfill, approver and ` +
    `${viewer.principal}: ${answer.body}`);
    ok(`POST :approve with the viewer's token from the page: 403, google.rpc.Status ` +
       `code 7, ErrorInfo ROLE_REQUIRED (${JSON.stringify(meta)})`);
    const job = await getJob(VIEWER_TOKEN);
    expect(job.state === AWAITING && !job.approval,
        `after the refused approval ${JOB} is ${job.state} ` +
        `(approval: ${JSON.stringify(job.approval)})`);
    ok(`the refused approval changed nothing: ${JOB} still awaits approval`);
  });

  await step('a partition\'s panel (viewer)', async () => {
    const cell = await page.$('#main [role=grid] [role=gridcell]');
    expect(cell, 'no partition cell to click');
    const record = await cell.evaluate((el) => ({
      partition: el.record.partition, dataset: el.closest('[role=grid]')
          .getAttribute('aria-label').replace(/^Partitions of /, ''),
      state: el.record.state,
    }));
    await cell.click();
    const name = record.partition === '' ? '(unpartitioned)' : record.partition;
    const title = `Partition ${record.dataset}/${name}`;
    await waitInPage(page, `the panel of ${record.dataset}/${name}`, (t) => {
      const panel = document.querySelector('#main .partition-panel');
      if (!panel || panel.hidden) return false;
      const h2 = panel.querySelector('h2');
      return Boolean(h2 && h2.textContent === t && !panel.querySelector('.loading'));
    }, title, () => {
      const panel = document.querySelector('#main .partition-panel');
      return panel ? `hidden=${panel.hidden}: ${panel.innerText.slice(0, 800)}` : 'no panel';
    });
    const hash = await page.evaluate(() => location.hash);
    expect(hash === `#/backfills/${JOB}/partitions/${encodeURIComponent(record.dataset)}/` +
                    `${encodeURIComponent(record.partition)}`,
    `the address after the click is ${hash}`);
    const panel = await page.$eval('#main .partition-panel', (el) => ({
      text: el.innerText,
      versions: el.querySelectorAll('ol.versions > li.version').length,
      focused: document.activeElement === el.querySelector('h2'),
      error: (el.querySelector('.error-box') || {}).textContent || '',
    }));
    expect(!panel.error, `the panel shows an error: ${panel.error}`);
    expect(panel.focused, 'the panel\'s heading does not have focus once it opens');
    const stateWords = record.state.replace(/^PARTITION_STATE_/, '').toLowerCase()
        .replace(/_/g, ' ');
    expect(panel.text.includes('State in this job') && panel.text.includes(stateWords),
        `the panel does not say the partition's state in the job (${stateWords}): ` +
        `${panel.text.slice(0, 600)}`);
    ok(`a click on a cell opens the panel "${title}" (state in this job: ${stateWords}), ` +
       `with focus on its heading`);
    // What the panel says of its published versions, against the API.
    const explain = await apiGet(`/v1/datasets/${encodeURIComponent(record.dataset)}` +
        `/partitions/${encodeURIComponent(record.partition)}:explain`, VIEWER_TOKEN);
    const versions = (explain.versions || []).length;
    expect(panel.text.includes('Published versions (ExplainPartition)'),
        'the panel has no ExplainPartition section');
    if (versions === 0) {
      expect(panel.text.includes('Never published: lineage has no version of this partition.'),
          `ExplainPartition has no version, but the panel does not say "Never published": ` +
          `${panel.text.slice(0, 800)}`);
      ok(`the panel's "why" says what ExplainPartition says: never published yet`);
    } else {
      expect(panel.versions === versions,
          `ExplainPartition has ${versions} versions, the panel lists ${panel.versions}`);
      ok(`the panel's "why" lists the ${versions} version(s) ExplainPartition gives`);
    }
    await page.$eval('#main .partition-panel', (el) => el.scrollIntoView());
    await driver.screenshot('03-partition');
    // Escape closes it, and focus goes back to the cell.
    await driver.press('Escape');
    await waitInPage(page, 'the panel to close on Escape', (p) => {
      const panel = document.querySelector('#main .partition-panel');
      const el = document.activeElement;
      return Boolean(panel && panel.hidden && el && el.record && el.record.partition === p);
    }, record.partition);
    ok('Escape closes the panel and gives focus back to the cell');
  });

  await step('the datasets page (viewer)', async () => {
    await page.click('#nav a[href="#/datasets"]');
    const row = await waitInPage(page, 'the datasets table with daily_revenue', () => {
      const main = document.getElementById('main');
      const h1 = main.querySelector('h1');
      if (!h1 || h1.textContent !== 'Datasets' || main.querySelector('.loading')) return false;
      const link = Array.from(main.querySelectorAll('table a'))
          .find((a) => a.textContent === 'daily_revenue');
      return link ? link.closest('tr').innerText : false;
    }, null);
    expect(/approval required/.test(row), `daily_revenue's row says no approval: ${row}`);
    ok('the datasets page lists daily_revenue, approval required');
    await driver.screenshot('04-datasets', {fullPage: true});
  });

  await step('the plan page (viewer)', async () => {
    await page.click('#nav a[href="#/plan"]');
    await waitInPage(page, 'the plan page with its datasets', () => {
      const main = document.getElementById('main');
      const h1 = main.querySelector('h1');
      return Boolean(h1 && h1.textContent === 'Plan a backfill' &&
          Array.from(main.querySelectorAll('select option'))
              .some((o) => o.value === 'daily_revenue'));
    }, null);
    const buttons = await visibleButtons(page);
    const text = await page.$eval('#main', (el) => el.innerText);
    expect(!buttons.includes('Submit the backfill') &&
           text.includes('Your roles do not allow submitting (SubmitBackfill).'),
    `the plan page offers the viewer a submit: ${JSON.stringify(buttons)}`);
    ok('the plan page shows; it offers the viewer no submit');
    await driver.screenshot('05-plan', {fullPage: true});
  });

  // --- As the approver ---
  await step('sign out, sign in as the approver', async () => {
    const signOut = await page.$$('#who button');
    expect(signOut.length === 1, 'no Sign out button in the header');
    await signOut[0].click();
    await waitInPage(page, 'the sign-in form after signing out', () => {
      const signin = document.getElementById('signin');
      const main = document.getElementById('main');
      return Boolean(!signin.hidden && main.hidden);
    }, null);
    const kept = await page.evaluate((key) => sessionStorage.getItem(key), TOKEN_KEY);
    expect(!kept, 'the token is still in sessionStorage after signing out');
    ok('Sign out forgets the token and shows the sign-in form');
    await signInWithForm(page, APPROVER_TOKEN);
    const who = await page.$eval('#who', (el) => el.textContent);
    expect(who.includes(approver.principal) && who.includes('approver'),
        `the header says "${who}", not the approver ${approver.principal}`);
    ok(`signed in as the approver: the header says "${who.replace('Sign out', '').trim()}"`);
  });

  await step('approve with the keyboard (approver)', async () => {
    await driver.route(`#/backfills/${JOB}`);
    await waitJobPage(page, 'awaiting approval');
    const decisions = await waitInPage(page, 'the decisions of the approver',
        () => {
          const buttons = Array.from(
              document.querySelectorAll('#main .actions[role=group] button'));
          return buttons.length ? buttons.map((b) => b.textContent.trim()) : false;
        }, null);
    expect(JSON.stringify(decisions) === JSON.stringify(['Approve']),
        `the approver is shown ${JSON.stringify(decisions)}, not just Approve ` +
        '(Cancel needs the operator role)');
    ok('the approver is shown the Approve decision (and no other)');

    // From the page's heading, Tab to Approve, Enter.
    await page.$eval('#main h1', (el) => el.focus());
    let focus = null;
    for (let i = 0; i < 30; i++) {
      await driver.press('Tab');
      focus = await driver.focused();
      if (focus && focus.tag === 'button' && focus.text === 'Approve') break;
    }
    expect(focus && focus.tag === 'button' && focus.text === 'Approve',
        `Tab from the heading never reached Approve (last: ${JSON.stringify(focus)})`);
    await driver.press('Enter');
    await waitInPage(page, 'the approval dialog', (job) => {
      const dialog = document.querySelector('dialog[open]');
      return Boolean(dialog && dialog.querySelector('h2').textContent === `Approve ${job}`);
    }, JOB);
    focus = await driver.focused();
    expect(focus.tag === 'textarea',
        `the dialog does not start in its reason field (focus: ${JSON.stringify(focus)})`);
    ok('Tab reaches Approve, Enter opens its dialog, focus is in the reason field');

    // Without a reason: refused in the dialog, nothing sent.
    const tabTo = async (text) => {
      for (let i = 0; i < 10; i++) {
        await driver.press('Tab');
        const f = await driver.focused();
        if (f && f.tag === 'button' && f.text === text) return;
      }
      throw new Error(`Tab in the dialog never reached "${text}"`);
    };
    await tabTo('Approve');
    await driver.press('Enter');
    const required = await waitInPage(page, 'the dialog to ask for a reason', () => {
      const dialog = document.querySelector('dialog[open]');
      const error = dialog && dialog.querySelector('.field-error:not([hidden])');
      return error && document.activeElement.tagName === 'TEXTAREA' ? error.textContent : false;
    }, null);
    expect(required === 'Reason is required.', `the dialog says "${required}"`);
    ok('Approve without a reason is refused in the dialog ("Reason is required."), ' +
       'focus back in the field');

    await page.keyboard.type(APPROVER_REASON);
    await driver.screenshot('06-approve-dialog');
    await tabTo('Approve');
    await driver.press('Enter');
    await waitInPage(page, 'the dialog to close after the approval',
        () => !document.querySelector('dialog'), null, () => {
          const dialog = document.querySelector('dialog');
          return dialog ? dialog.innerText : '';
        });
    ok(`the reason typed and Approve pressed: the dialog closed`);
  });

  await step(`${JOB} ends SUCCEEDED (API, up to 60 s)`, async () => {
    const deadline = Date.now() + 60000;
    const seen = [];
    let job = null;
    for (;;) {
      job = await getJob(APPROVER_TOKEN);
      if (seen[seen.length - 1] !== job.state) seen.push(job.state);
      if (TERMINAL.has(job.state) || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(job.state === SUCCEEDED,
        `${JOB} is ${job.state} (states seen: ${seen.join(' → ')}; ` +
        `message: ${job.message || ''})`);
    const approval = job.approval || {};
    expect((approval.approvedBy || '').includes(approver.principal) &&
           approval.reason === APPROVER_REASON,
    `the job's approval is ${JSON.stringify(job.approval)}`);
    ok(`${JOB} left AWAITING_APPROVAL and ended SUCCEEDED (${seen.join(' → ')}), ` +
       `approved by ${approval.approvedBy} with the reason typed`);
  });

  await step('the job page after the approval (approver)', async () => {
    await waitJobPage(page, 'succeeded');
    await waitInPage(page, 'every cell to show published', (n) => {
      const cells = Array.from(document.querySelectorAll('#main [role=gridcell]'));
      return cells.length === n &&
          cells.every((c) => / published$/.test(c.getAttribute('aria-label')));
    }, EXPECTED_CELLS, () => Array.from(document.querySelectorAll('#main [role=gridcell]'))
        .map((c) => c.getAttribute('aria-label')).join('; '));
    ok(`the job page says succeeded, all ${EXPECTED_CELLS} cells published`);
    const text = await waitInPage(page, 'the approval on the job page', (reason) => {
      const main = document.getElementById('main');
      return main.innerText.includes(reason) ? main.innerText : false;
    }, APPROVER_REASON);
    expect(text.includes('Approved by'), 'the job page does not say who approved');
    const decisions = await decisionButtons(page);
    expect(JSON.stringify(decisions) === JSON.stringify(['Roll back']),
        `after success the approver is shown ${JSON.stringify(decisions)}, not just Roll back`);
    ok('the job page shows the approval and its reason; the approver may now Roll back');
    // Step 6 ran: the page must not say the confirmation is still to come.
    const confirmations = ((await getJob(APPROVER_TOKEN)).confirmations || []).length;
    const section = await page.evaluate(() => {
      const s = Array.from(document.querySelectorAll('#main section.panel')).find(
          (el) => (el.querySelector('h2') || {}).textContent === 'Downstream confirmation');
      return s ? {text: s.innerText, rows: s.querySelectorAll('tbody tr').length} : null;
    });
    expect(section, 'no Downstream confirmation section');
    if (confirmations === 0) {
      expect(!section.text.includes('yet') && section.text.includes('nothing to confirm'),
          `the job confirmed no consumer (none declared), but the page says: ${section.text}`);
    } else {
      expect(section.rows === confirmations,
          `the job confirmed ${confirmations} consumers, the page lists ${section.rows}`);
    }
    ok(`the Downstream confirmation section agrees with the job (${confirmations} ` +
       `consumer(s) confirmed${confirmations ? '' : ': none declared, nothing to confirm'})`);
    await driver.screenshot('07-job-succeeded', {fullPage: true});
  });

  await step('a published partition\'s panel lists its checks (approver)', async () => {
    const cell = await page.$('#main [role=grid] [role=gridcell]');
    expect(cell, 'no partition cell to click');
    const partition = await cell.evaluate((el) => el.record.partition);
    await cell.click();
    // The newest version's checks list: per item its badge's word and name.
    const shown = await waitInPage(page, `the panel of ${partition} with its version`, () => {
      const panel = document.querySelector('#main .partition-panel');
      if (!panel || panel.hidden || panel.querySelector('.loading')) return false;
      const version = panel.querySelector('ol.versions > li.version');
      if (!version) return false;
      return Array.from(version.querySelectorAll('ul.checks-list > li.check')).map((li) => ({
        badge: (li.querySelector('.badge') || {}).textContent || '',
        name: (li.querySelector('code') || {}).textContent || '',
      }));
    }, null, () => {
      const panel = document.querySelector('#main .partition-panel');
      return panel ? panel.innerText.slice(0, 800) : 'no panel';
    });
    const explain = await apiGet('/v1/datasets/daily_revenue/partitions/' +
        `${encodeURIComponent(partition)}:explain`, APPROVER_TOKEN);
    const checks = ((explain.versions || [])[0] || {}).checks || [];
    expect(checks.length > 0, `ExplainPartition gives no checks for ${JOB}'s version of ` +
        `${partition}: ${JSON.stringify(explain)}`);
    const word = (c) => {
      if (c.summary) return Number(c.partitionsFailed || 0) > 0 ? 'not kept' : 'not checked';
      return c.passed ? 'passed' : 'failed';
    };
    const want = checks.map((c) => ({badge: word(c), name: c.name}));
    expect(JSON.stringify(shown) === JSON.stringify(want),
        `the panel's checks are ${JSON.stringify(shown)}, ExplainPartition's ` +
        `${JSON.stringify(want)}`);
    ok(`the panel of ${partition} lists the ${checks.length} checks ExplainPartition gives ` +
       `its version, each with its outcome in words`);
    await driver.press('Escape');
    await waitInPage(page, 'the panel to close on Escape', () => {
      const panel = document.querySelector('#main .partition-panel');
      return Boolean(panel && panel.hidden);
    }, null);
  });

  await step('the dataset page: its partitions and how current each is', async () => {
    const job = await apiGet(`/v1/backfills/${encodeURIComponent(JOB)}`, APPROVER_TOKEN);
    const plan = (job.plan || []).find((d) => d.dataset === 'daily_revenue') || {};
    const mine = plan.partitions || [];
    expect(mine.length > 0, `${JOB} planned no partition of daily_revenue`);
    await page.evaluate(() => {
      location.hash = '#/datasets/daily_revenue';
    });
    const seen = await waitInPage(page, 'the freshness grid of daily_revenue', () => {
      const box = document.querySelector('#main .freshness');
      const grid = box && box.querySelector('[role=grid]');
      if (!grid) return false;
      return {
        summary: box.querySelector('p').textContent,
        cells: Array.from(grid.querySelectorAll('[role=gridcell]'))
            .map((c) => c.getAttribute('aria-label')),
      };
    }, null);
    const total = Number(((/^([\d,]+) published partition/.exec(seen.summary) || [])[1] || '')
        .replace(/,/g, ''));
    expect(total === seen.cells.length,
        `the summary says "${seen.summary}", the grid has ${seen.cells.length} cells`);
    for (const p of mine) {
      expect(seen.cells.some((label) => label.startsWith(`${p}: current`)),
          `partition ${p} of ${JOB} is not drawn current`);
    }
    ok(`the dataset page draws its ${total} published partitions, the ${mine.length} of ` +
       `${JOB} current`);
    await page.select('#freshness-filter', '');
    const rows = await page.$$eval('#main .freshness table tbody tr',
        (trs) => trs.map((tr) => tr.innerText));
    for (const p of mine) {
      expect(rows.some((r) => r.startsWith(p) && r.includes(`published by ${JOB}`)),
          `the table does not say ${p} was published by ${JOB}`);
    }
    ok(`its table says ${JOB} published each of its partitions`);
    await driver.screenshot('08-dataset-freshness', {fullPage: true});
  });

  await step('no error, no other origin, no unexpected refusal', async () => {
    const session = `${ORIGIN}/ui/session`;
    const approve = `${ORIGIN}/v1/backfills/${encodeURIComponent(JOB)}:approve`;
    const expected = [
      {status: 401, method: 'GET', url: session},
      {status: 403, method: 'POST', url: approve},
    ];
    const key = (r) => `${r.status} ${r.method} ${r.url}`;
    const got = driver.failedResponses.map(key);
    expect(JSON.stringify(got) === JSON.stringify(expected.map(key)),
        `refused requests: ${JSON.stringify(got)}; expected exactly ` +
        `${JSON.stringify(expected.map(key))}`);
    // Chromium logs each refused load as a console error: exactly those two.
    const refusedLoads = driver.consoleErrors.filter((e) => /status of \d+/.test(e.text));
    const allowed = (e) => (e.text.includes('status of 401') && e.url === session) ||
        (e.text.includes('status of 403') && e.url === approve);
    expect(refusedLoads.length <= expected.length && refusedLoads.every(allowed),
        `console errors of refused loads: ${JSON.stringify(refusedLoads)}`);
    driver.assertClean({allowStatuses: [401, 403]});
    ok(`no console error, no uncaught exception, no request to another origin; ` +
       `refused requests: only the 401 before sign-in and the provoked 403`);
  });
}

async function main() {
  let driver = null;
  let code = 0;
  const watchdog = setTimeout(async () => {
    console.log(`FAIL - ${current}: the test did not end within ${TIMEOUT_SECONDS} s`);
    try {
      if (driver) await driver.close();
    } finally {
      process.exit(1);
    }
  }, TIMEOUT_SECONDS * 1000);
  try {
    driver = await ConsoleDriver.launch({screenshotDir: args.shots});
    await run(driver);
    console.log(`all ${passed} checks passed; screenshots in ${args.shots}`);
  } catch (e) {
    code = 1;
    console.log(`FAIL - ${current}: ${e && e.stack ? e.stack : e}`);
    if (driver) {
      try {
        console.log(`  address: ${await driver.page.evaluate(() => location.href)}`);
        await driver.screenshot('99-failure', {fullPage: true});
        console.log(`  screenshot: ${args.shots}/99-failure.png`);
      } catch (e2) {
        console.log(`  (no failure screenshot: ${e2.message})`);
      }
      console.log(`  console errors: ${JSON.stringify(driver.consoleErrors)}`);
      console.log(`  uncaught: ${JSON.stringify(driver.pageErrors)}`);
      console.log(`  other origins: ${JSON.stringify(driver.crossOriginRequests)}`);
      console.log(`  refused requests: ${JSON.stringify(driver.failedResponses)}`);
    }
  } finally {
    clearTimeout(watchdog);
    if (driver) {
      try {
        await driver.close();
      } catch (e) {
        console.log(`closing the browser failed: ${e.message}`);
      }
    }
  }
  process.exit(code);
}

main();
