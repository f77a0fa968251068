// The jobs page (#/backfills): ListBackfills in pages (newest first) with
// filters by state and dataset (the fields of ListBackfillsRequest, kept in
// the route's query so that a filtered list can be linked), refreshed every
// few seconds.

import {api} from '../api.js';
import {button, field, h, link, replace, table} from '../dom.js';
import {JOB_STATES, fmtCompact, fmtInt, jobStateBadge, jobStateText, num,
  scopeText, timeEl} from '../format.js';
import {hashOf, navigate} from '../router.js';

const REFRESH_MS = 5000;

function progressCell(job) {
  const c = job.partitions || {};
  const total = num(c.total);
  const done = num(c.staged) + num(c.published) + num(c.unchanged) + num(c.skipped);
  const failed = num(c.failed);
  return h('div', {class: 'mini-progress'},
      h('progress', {max: String(Math.max(total, 1)), value: String(done),
                     'aria-label': `${job.id}: ${fmtInt(done)} of ${fmtInt(total)} done`}),
      h('span', null, `${fmtInt(done)}/${fmtInt(total)}`,
          failed ? h('span', {class: 'bad'}, ` · ${fmtInt(failed)} failed`) : null));
}

function costCell(job) {
  const est = num((job.costEstimate || {}).backfill);
  const actual = num(job.actualCost);
  return h('span', {title: 'input rows: actual / estimated'},
      `${fmtCompact(actual)} / ${fmtCompact(est)}`);
}

function datasetsCell(job) {
  const plan = job.plan || [];
  const main = (job.request || {}).dataset || (plan[0] || {}).dataset || '';
  const others = plan.filter((p) => p.dataset !== main).map((p) => p.dataset);
  return h('span', null, main ? link(hashOf('datasets', main), main) : '—',
      others.length ? h('span', {class: 'hint', title: others.join(', ')},
          ` +${others.length} downstream`) : null);
}

const COLUMNS = [
  {label: 'Job', cell: (j) => link(hashOf('backfills', j.id), j.id)},
  {label: 'State', cell: (j) => jobStateBadge(j.state)},
  {label: 'Dataset', cell: datasetsCell},
  {label: 'Scope', cell: (j) => scopeText(j.request, j.requestedPartitionCount)},
  {label: 'Reason', class: 'wrap', cell: (j) => (j.request || {}).reason || ''},
  {label: 'Ticket', cell: (j) => (j.request || {}).ticket || ''},
  {label: 'Who', cell: (j) => (j.request || {}).requestedBy || ''},
  {label: 'Progress', cell: progressCell},
  {label: 'Cost', class: 'num', cell: costCell},
  {label: 'Created', cell: (j) => timeEl(j.createTime)},
];

class JobsPage {
  constructor(container, query) {
    this.container = container;
    this.abort = new AbortController();
    this.states = query.getAll('states').filter((s) => JOB_STATES.includes(s));
    this.dataset = query.get('dataset') || '';
    this.pageSize = Math.min(1000, Math.max(1, Number(query.get('pageSize')) || 50));
    this.tokens = [''];  // page tokens of the pages seen; last: this page's
    this.timer = 0;

    this.status = h('p', {class: 'hint', 'aria-live': 'polite'});
    this.body = h('div', {class: 'jobs-table'});
    this.pager = h('div', {class: 'pager'});
    replace(container, 
        h('h1', null, 'Jobs'),
        this.filters(),
        this.status, this.body, this.pager);
    document.title = 'Jobs · backfilld';
    this.load();
  }

  filters() {
    const stateBoxes = JOB_STATES.map((state) => field(jobStateText(state), 'input', {
      type: 'checkbox', name: 'states', value: state,
      checked: this.states.includes(state),
    }));
    const datasetField = field('Dataset', 'select', {name: 'dataset'}, [['', 'Any dataset']]);
    const sizeField = field('Jobs per page', 'select', {name: 'pageSize'},
        [['20', '20'], ['50', '50'], ['100', '100'], ['500', '500']]);
    sizeField.control.value = String(this.pageSize);
    api.listDatasets({signal: this.abort.signal}).then((r) => {
      for (const d of r.datasets || []) {
        datasetField.control.appendChild(h('option', {value: d.name}, d.name));
      }
      datasetField.control.value = this.dataset;
    }).catch(() => {});
    if (this.dataset) {
      datasetField.control.appendChild(h('option', {value: this.dataset}, this.dataset));
      datasetField.control.value = this.dataset;
    }
    const form = h('form', {class: 'filters', 'aria-label': 'Filter the jobs'},
        h('details', {class: 'state-filter', open: this.states.length > 0},
            h('summary', null, this.states.length ?
              `States (${this.states.length} chosen)` : 'States (all)'),
            h('fieldset', null, h('legend', {class: 'visually-hidden'}, 'Only jobs in these states'),
                h('div', {class: 'checks'}, stateBoxes.map((f) => f.row)))),
        datasetField.row, sizeField.row,
        h('div', {class: 'filter-buttons'},
            h('button', {type: 'submit', class: 'primary'}, 'Apply'),
            button('Clear', () => navigate('#/backfills'))));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const q = new URLSearchParams();
      for (const f of stateBoxes) if (f.control.checked) q.append('states', f.control.value);
      if (datasetField.control.value) q.set('dataset', datasetField.control.value);
      if (sizeField.control.value !== '50') q.set('pageSize', sizeField.control.value);
      const text = q.toString();
      navigate(`#/backfills${text ? `?${text}` : ''}`);
    });
    return form;
  }

  async load(quiet) {
    clearTimeout(this.timer);
    const token = this.tokens[this.tokens.length - 1];
    if (!quiet) this.status.textContent = 'Loading jobs…';
    try {
      const page = await api.listBackfills({
        states: this.states, dataset: this.dataset, pageSize: this.pageSize,
        pageToken: token,
      }, {signal: this.abort.signal});
      const jobs = page.backfills || [];
      const focusedId = document.activeElement && this.body.contains(document.activeElement) ?
        document.activeElement.textContent : null;
      replace(this.body, table(COLUMNS, jobs, {
        caption: `Jobs, newest first${this.tokens.length > 1 ? `, page ${this.tokens.length}` : ''}`,
        className: 'data jobs',
        empty: this.states.length || this.dataset ? 'No job matches these filters.' :
          'No jobs yet.',
      }));
      if (focusedId) {
        const again = Array.from(this.body.querySelectorAll('a'))
            .find((a) => a.textContent === focusedId);
        if (again) again.focus();
      }
      this.renderPager(page.nextPageToken || '');
      this.status.textContent = quiet ? this.status.textContent :
        `${jobs.length} job${jobs.length === 1 ? '' : 's'} shown.`;
    } catch (e) {
      if (e.name === 'AbortError') return;
      this.status.textContent = '';
      replace(this.body, h('div', {class: 'error-box', role: 'alert'}, e.message));
    }
    this.timer = setTimeout(() => this.load(true), REFRESH_MS);
  }

  renderPager(next) {
    const want = this.focusPager;
    this.focusPager = null;
    const page = (label, move) => button(label, () => {
      move();
      this.focusPager = label;
      return this.load();
    });
    const buttons = [];
    if (this.tokens.length > 1) buttons.push(page('← Newer jobs', () => this.tokens.pop()));
    if (next) buttons.push(page('Older jobs →', () => this.tokens.push(next)));
    replace(this.pager, ...buttons);
    if (want) {
      // Paging replaced the button that had focus: keep focus on the pager.
      const same = buttons.find((b) => b.textContent === want) || buttons[0];
      if (same) same.focus();
    }
  }

  unmount() {
    this.abort.abort();
    clearTimeout(this.timer);
  }
}

export const jobsPage = {
  mount(container, params, query) {
    return new JobsPage(container, query);
  },
};
