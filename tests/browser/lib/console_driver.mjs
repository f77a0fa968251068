// Drives the backfilld console (server/console/, served by the daemon under
// /ui/) in Debian's headless Chromium through puppeteer-core, for the
// console's browser tests.
//
// Launches /usr/bin/chromium (override with BACKFILL_CHROMIUM) headless with
// --no-sandbox (CI runs as root), opens the console, and records while the
// page runs:
//   consoleErrors       every console message of type error (uncaught
//                       exceptions, console.error, Content-Security-Policy
//                       violations, failed loads), as {text, url}
//   pageErrors          uncaught exceptions, as Error messages
//   crossOriginRequests every request to an origin other than the
//                       console's (the console must make none)
//   failedResponses     every response with status >= 400, as
//                       {status, method, url}
// and offers helpers to sign in with a token, move between routes, read
// what has focus, and take screenshots into a directory.
//
//   import {ConsoleDriver} from './lib/console_driver.mjs';
//   const driver = await ConsoleDriver.launch({screenshotDir: '/tmp/shots'});
//   await driver.open('http://127.0.0.1:8080/ui/');
//   await driver.signIn(token);             // when the daemon has tokens
//   await driver.route('#/backfills/bf-3');  // waits for the page's h1
//   await driver.screenshot('job');
//   driver.assertClean({allowStatuses: [401]});
//   await driver.close();
//
// One driver is one browser with one page; not for concurrent use.

import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

export const CHROMIUM = process.env.BACKFILL_CHROMIUM || '/usr/bin/chromium';

export class ConsoleDriver {
  // options: screenshotDir (created when missing), viewport ({width,
  // height}; 1280x900 by default), slowMo (ms between actions, for
  // watching), headless (false to watch under a display).
  static async launch(options = {}) {
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: options.headless === false ? false : true,
      args: [
        '--no-sandbox',
        '--headless=new',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--no-first-run',
        '--no-default-browser-check',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--metrics-recording-only',
        '--lang=en-US',
      ].filter((flag) => options.headless !== false || flag !== '--headless=new'),
      slowMo: options.slowMo || 0,
      defaultViewport: options.viewport || {width: 1280, height: 900},
    });
    const page = await browser.newPage();
    return new ConsoleDriver(browser, page, options);
  }

  constructor(browser, page, options) {
    this.browser = browser;
    this.page = page;
    this.screenshotDir = options.screenshotDir || '';
    this.origin = '';
    this.consoleErrors = [];
    this.pageErrors = [];
    this.crossOriginRequests = [];
    this.failedResponses = [];
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      const location = message.location() || {};
      this.consoleErrors.push({text: message.text(), url: location.url || ''});
    });
    page.on('pageerror', (error) => {
      this.pageErrors.push(error && error.message ? error.message : String(error));
    });
    page.on('request', (request) => {
      const url = request.url();
      if (!this.origin || url.startsWith('data:') || url.startsWith('blob:') ||
          url.startsWith('about:')) {
        return;
      }
      let origin;
      try {
        origin = new URL(url).origin;
      } catch (e) {
        origin = '';
      }
      if (origin !== this.origin) this.crossOriginRequests.push(url);
    });
    page.on('response', (response) => {
      if (response.status() >= 400) {
        this.failedResponses.push({status: response.status(),
                                   method: response.request().method(),
                                   url: response.url()});
      }
    });
  }

  // Opens `url` (the console, e.g. http://127.0.0.1:PORT/ui/) and waits
  // until the sign-in form or a page of the console shows.
  async open(url) {
    this.origin = new URL(url).origin;
    await this.page.goto(url, {waitUntil: 'load'});
    await this.page.waitForFunction(() => {
      const signin = document.getElementById('signin');
      const main = document.getElementById('main');
      return (signin && !signin.hidden) ||
          (main && !main.hidden && main.querySelector('h1'));
    }, {timeout: 15000});
  }

  // Whether the sign-in form is showing.
  async signInShown() {
    return this.page.$eval('#signin', (el) => !el.hidden);
  }

  // Types `token` into the sign-in form and waits for the console to
  // start; throws with the form's message when the token is refused.
  async signIn(token) {
    await this.page.waitForSelector('#token', {visible: true});
    await this.page.$eval('#token', (el) => {
      el.value = '';
    });
    await this.page.type('#token', token);
    await this.page.click('#signin-form button[type=submit]');
    await this.page.waitForFunction(() => {
      const main = document.getElementById('main');
      const status = document.getElementById('signin-status');
      return (main && !main.hidden && main.querySelector('h1')) ||
          (status && !status.hidden && status.textContent);
    }, {timeout: 15000});
    const refused = await this.page.$eval('#signin-status',
        (el) => (el.hidden ? '' : el.textContent));
    if (await this.signInShown()) {
      throw new Error(`sign-in refused: ${refused || '(no message)'}`);
    }
  }

  // Clears the token (sessionStorage) and reloads: the sign-in form shows
  // again when the daemon needs one.
  async signOut() {
    await this.page.evaluate(() => sessionStorage.clear());
    await this.page.reload({waitUntil: 'load'});
  }

  // Goes to a hash route ("#/backfills/bf-3") and waits for its heading;
  // with `text`, until the main element contains that text too.
  async route(hash, {text, timeout = 15000} = {}) {
    await this.page.evaluate((h) => {
      location.hash = h;
    }, hash);
    await this.page.waitForFunction((t) => {
      const main = document.getElementById('main');
      if (!main || main.hidden || !main.querySelector('h1')) return false;
      if (main.querySelector('.loading')) return false;
      return !t || main.textContent.includes(t);
    }, {timeout}, text || '');
  }

  // Waits until the page holds `selector` (visible).
  async waitFor(selector, timeout = 15000) {
    return this.page.waitForSelector(selector, {visible: true, timeout});
  }

  // Presses a key (puppeteer's names: 'ArrowRight', 'Enter', 'Tab',
  // 'Escape', ...), `times` times.
  async press(key, times = 1) {
    for (let i = 0; i < times; i++) await this.page.keyboard.press(key);
  }

  // What has focus: {tag, role, label, text, id}.
  async focused() {
    return this.page.evaluate(() => {
      const el = document.activeElement;
      if (!el) return null;
      return {
        tag: el.tagName.toLowerCase(),
        role: el.getAttribute('role') || '',
        label: el.getAttribute('aria-label') || '',
        text: (el.textContent || '').trim().slice(0, 200),
        id: el.id || '',
      };
    });
  }

  async setViewport(width, height) {
    await this.page.setViewport({width, height});
  }

  // Saves a PNG of the page as `<screenshotDir>/<name>.png` (the whole
  // page with fullPage) and returns its path.
  async screenshot(name, {fullPage = false} = {}) {
    if (!this.screenshotDir) throw new Error('no screenshotDir given to launch()');
    fs.mkdirSync(this.screenshotDir, {recursive: true});
    const file = path.join(this.screenshotDir, `${name}.png`);
    await this.page.screenshot({path: file, fullPage});
    return file;
  }

  // Console errors other than the failed loads of responses whose status
  // is in allowStatuses (e.g. the 401 of the first session check when the
  // daemon needs a token: Chromium logs every refused load as an error).
  unexpectedConsoleErrors({allowStatuses = []} = {}) {
    return this.consoleErrors.filter((e) => !allowStatuses.some((status) =>
      e.text.includes(`status of ${status}`)));
  }

  // Throws when the page logged an unexpected error, threw, or asked
  // another origin for anything.
  assertClean(options = {}) {
    const problems = [];
    for (const e of this.unexpectedConsoleErrors(options)) {
      problems.push(`console error: ${e.text}${e.url ? ` (${e.url})` : ''}`);
    }
    for (const e of this.pageErrors) problems.push(`uncaught: ${e}`);
    for (const url of this.crossOriginRequests) problems.push(`request to another origin: ${url}`);
    if (problems.length) throw new Error(problems.join('\n'));
  }

  // Forgets what was recorded so far (e.g. after an expected refusal).
  resetRecords() {
    this.consoleErrors = [];
    this.pageErrors = [];
    this.crossOriginRequests = [];
    this.failedResponses = [];
  }

  async close() {
    await this.browser.close();
  }
}
