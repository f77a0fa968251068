// The job page (#/backfills/{id}, and #/backfills/{id}/partitions/
// {dataset}/{partition} with a partition's panel open): state and
// decisions, live progress with ETA from the watch stream, the timeline,
// the partition grid built from ListPartitions pages, cost, request,
// checks, diff, confirmations and the audit trail.

import {allPages, api, watchBackfill} from '../api.js';
import {button, clear, h, link, replace, section} from '../dom.js';
import {actionButtons} from '../actions.js';
import {jobRecordView, loadExplain, partitionName} from '../explain.js';
import {ACTIVE_JOB_STATES, PARTITION_STATES, fmtInt, fmtSeconds, jobStateBadge,
  jobStateText, num, partitionStateText, richText} from '../format.js';
import {PartitionGrid, legend} from '../grid.js';
import {hashOf, navigate} from '../router.js';
import {announce, showPageError} from '../status.js';
import {auditView, checksView, confirmationsView, costView, decisionsView,
  diffSection, loadAudit, requestView, timelineView} from './job_sections.js';

const GRID_REFRESH_MS = 4000;
const POLL_MS = 5000;

function partitionHref(id) {
  return (dataset, partition) => `${hashOf('backfills', id, 'partitions', dataset)}/` +
      encodeURIComponent(partition);
}

class JobPage {
  constructor(container, params) {
    this.container = container;
    this.id = params.id;
    this.abort = new AbortController();
    this.job = null;
    this.events = [];
    this.records = new Map();  // dataset -> [BackfillPartition]
    this.grids = new Map();  // dataset -> PartitionGrid
    this.lastGridRefresh = 0;
    this.gridRefreshing = false;
    this.watching = false;
    this.pollTimer = 0;
    this.timelineTimer = 0;
    this.selected = null;  // {dataset, partition}

    this.heading = h('h1', null, `Job ${this.id}`);
    this.badge = h('span', {class: 'title-badge'});
    this.message = h('p', {class: 'job-message'});
    this.step = h('p', {class: 'current-step'});
    this.actions = h('div', {class: 'actions-slot'});
    this.progress = h('div', {class: 'progress-body'});
    this.timeline = h('div');
    this.gridStatus = h('p', {class: 'hint', 'aria-live': 'polite'});
    this.gridBody = h('div', {class: 'grids'});
    this.legendSlot = h('div');
    this.panel = h('section', {class: 'panel partition-panel', hidden: true,
                               'aria-labelledby': `pp-${this.id}`});
    this.cost = h('div');
    this.request = h('div');
    this.checks = h('div');
    this.diff = h('div');
    this.confirmations = h('div');
    this.decisions = h('div');
    this.audit = h('div');
    this.panel.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && !event.defaultPrevented) {
        event.preventDefault();
        this.closePanel();
      }
    });
    this.decisionsSection = section('Approval and rollback', this.decisions);
    this.decisionsSection.hidden = true;

    replace(container, 
        h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'},
            link('#/backfills', 'Jobs'), ' / ', this.id),
        h('div', {class: 'title-row'}, this.heading, this.badge),
        this.message, this.step, this.actions,
        h('div', {class: 'columns'},
            section('Progress', this.progress),
            section('Timeline', this.timeline)),
        section('Partitions', this.legendSlot, this.gridStatus, this.gridBody),
        this.panel,
        section('Cost (input rows)', this.cost),
        section('Checks', this.checks),
        section('Diff', this.diff),
        section('Downstream confirmation', this.confirmations),
        this.decisionsSection,
        section('Request and plan', this.request),
        section('Audit trail', this.audit));
    this.load();
  }

  get signal() {
    return this.abort.signal;
  }

  async load() {
    try {
      const job = await api.getBackfill(this.id, 'BACKFILL_VIEW_BASIC',
          {signal: this.signal});
      this.setJob(job, true);
      this.loadEvents();
      await this.loadPartitions(true);
      this.startLive();
    } catch (e) {
      if (e.name === 'AbortError') return;
      showPageError(this.container, e, `Job ${this.id} could not be loaded`);
    }
  }

  async loadEvents() {
    try {
      this.events = await loadAudit(this.id, this.signal);
      replace(this.audit, auditView(this.events));
      this.renderTimeline();
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(this.audit, h('p', {class: 'error-box'},
          `The audit trail could not be loaded: ${e.message}`));
    }
  }

  // A job from GetBackfill (full: every section) or a watch update (the
  // BASIC view of an update has no checks, diff or confirmations).
  setJob(job, full) {
    const before = this.job;
    const stateChanged = before && before.state !== job.state;
    if (!full && before) {
      job = {...before, ...job, checks: before.checks, diff: before.diff,
             confirmations: before.confirmations, plan: job.plan || before.plan};
    }
    this.job = job;
    document.title = `${this.id} (${jobStateText(job.state)}) · backfilld`;
    replace(this.badge, jobStateBadge(job.state));
    replace(this.message, ...richText(job.message));
    this.step.textContent = job.currentStep || '';
    this.renderProgress();
    this.renderTimeline();
    replace(this.cost, costView(job));
    if (full || stateChanged) {
      replace(this.actions, actionButtons(job, (updated, action) =>
        this.afterAction(updated, action)) || '');
      replace(this.request, requestView(job));
      replace(this.checks, checksView(job, partitionHref(this.id)));
      replace(this.diff, diffSection(job, this.signal, partitionHref(this.id)));
      replace(this.confirmations, confirmationsView(job));
      const decisions = decisionsView(job);
      this.decisionsSection.hidden = !decisions;
      replace(this.decisions, decisions || '');
    }
    if (stateChanged) {
      announce(`Job ${this.id} is now ${jobStateText(job.state)}.`);
    }
  }

  renderProgress() {
    const job = this.job;
    const c = job.partitions || {};
    const total = num(c.total);
    const done = num(c.staged) + num(c.published) + num(c.unchanged) + num(c.skipped);
    const bar = h('progress', {max: String(Math.max(total, 1)), value: String(done),
                               id: `prog-${this.id}`});
    const parts = PARTITION_STATES.filter(([, f]) => num(c[f]) > 0)
        .map(([state, f]) => `${fmtInt(c[f])} ${partitionStateText(state)}`);
    let eta = '';
    if (job.eta) {
      eta = `About ${fmtSeconds(job.eta.remainingSeconds)} of recompute left ` +
          `(${fmtInt(job.eta.parallelism || 1)} at once, ` +
          `${fmtSeconds(job.eta.partitionSeconds)} per partition).`;
    } else if (job.state === 'BACKFILL_STATE_RUNNING') {
      eta = 'ETA: not known until a partition has been recomputed.';
    }
    replace(this.progress, 
        h('label', {for: `prog-${this.id}`},
            `${fmtInt(done)} of ${fmtInt(total)} partitions done`),
        bar,
        h('p', null, parts.join(', ') || 'No partitions.'),
        eta ? h('p', {class: 'eta'}, eta) : null,
        h('p', {class: 'hint'}, this.watching ? 'Live: following the job as it changes.' :
          ACTIVE_JOB_STATES.has(job.state) ? 'Refreshing every few seconds.' : ''));
    if (this.legendSlot.firstChild) {
      replace(this.legendSlot, legend(c));
    }
  }

  renderTimeline() {
    if (this.job) replace(this.timeline, timelineView(this.job, this.events));
  }

  // Reads every page of the job's partitions; builds the grids the first
  // time, updates their cells after.
  async loadPartitions(first) {
    if (this.gridRefreshing) return;
    this.gridRefreshing = true;
    this.lastGridRefresh = Date.now();
    const records = new Map();
    let count = 0;
    try {
      if (first) this.gridStatus.textContent = 'Loading partitions…';
      await allPages((token) => api.listPartitions(this.id, {pageSize: 1000, pageToken: token},
          {signal: this.signal}), (page) => {
        for (const p of page.partitions || []) {
          if (!records.has(p.dataset)) records.set(p.dataset, []);
          records.get(p.dataset).push(p);
          count++;
        }
        if (first) {
          this.gridStatus.textContent = `Loading partitions… ${fmtInt(count)} of ` +
              `${fmtInt(num((this.job.partitions || {}).total))}`;
        }
      });
      this.records = records;
      if (first) this.buildGrids();
      else for (const [dataset, list] of records) {
        const grid = this.grids.get(dataset);
        if (grid) grid.updateRecords(list);
      }
      this.gridStatus.textContent = `${fmtInt(count)} partitions in ` +
          `${records.size} dataset${records.size === 1 ? '' : 's'}. ` +
          'Arrow keys move between cells; Enter opens a partition.';
      if (first && this.selected) this.showPanel();
    } catch (e) {
      if (e.name === 'AbortError') return;
      this.gridStatus.textContent = `The partitions could not be loaded: ${e.message}`;
    } finally {
      this.gridRefreshing = false;
    }
  }

  buildGrids() {
    this.grids.clear();
    replace(this.legendSlot, legend(this.job.partitions || {}));
    const plans = new Map((this.job.plan || []).map((p) => [p.dataset, p]));
    const blocks = [];
    for (const [dataset, list] of this.records) {
      const plan = plans.get(dataset) || {};
      const grid = new PartitionGrid({
        dataset,
        grain: plan.grain,
        keyColumn: plan.partitionKeyColumn,
        onActivate: (record) => navigate(partitionHref(this.id)(dataset, record.partition)),
      });
      grid.setPartitions(list);
      this.grids.set(dataset, grid);
      blocks.push(h('div', {class: 'grid-block'},
          h('h3', null, link(hashOf('datasets', dataset), dataset),
              h('span', {class: 'hint'}, ` · ${fmtInt(list.length)} partitions`)),
          grid.element));
    }
    replace(this.gridBody, ...blocks);
  }

  // The partition panel: what the job recorded, and its lineage.
  showPanel() {
    const {dataset, partition} = this.selected;
    const record = (this.records.get(dataset) || []).find((r) => r.partition === partition);
    const headingId = `pp-${this.id}`;
    const explain = h('div');
    this.panel.hidden = false;
    replace(this.panel, 
        h('div', {class: 'panel-head'},
            h('h2', {id: headingId, tabindex: '-1'},
                `Partition ${dataset}/${partitionName(partition)}`),
            button('Close', () => this.closePanel(), {class: 'close',
              'aria-label': 'Close the partition panel'})),
        record ? h('h3', null, `In ${this.id}`) : null,
        jobRecordView(record),
        this.partitionChecks(dataset, partition),
        h('h3', null, 'Published versions (ExplainPartition)'),
        explain);
    loadExplain(explain, dataset, partition, this.signal);
    // The cell stays the grid's tab stop, so that Close (or Shift+Tab back
    // into the grid) returns to it.
    const grid = this.grids.get(dataset);
    if (grid && grid.has(partition)) grid.selectPartition(partition);
    this.panel.querySelector('h2').focus();
  }

  // The job's check results about one partition: its failures (the job
  // lists at most 100 failing partitions per check and dataset), else what
  // the summaries say.
  partitionChecks(dataset, partition) {
    const checks = (this.job && this.job.checks) || [];
    const own = checks.filter((c) => c.dataset === dataset && !c.summary &&
        (c.partition || '') === partition);
    const summaries = checks.filter((c) => c.dataset === dataset && c.summary);
    if (own.length === 0 && summaries.length === 0) return null;
    return h('div', null, h('h4', null, 'Checks in this job'), own.length ?
      h('ul', null, own.map((c) => h('li', null,
          h('span', {class: c.passed ? 'ok' : 'bad'}, c.passed ? '✔ ' : '✘ '),
          h('code', null, c.name), ` (${c.kind}): `, c.observed ? `observed ${c.observed}` : '',
          c.allowed ? `, allowed ${c.allowed}` : '', c.message ? ` — ${c.message}` : '',
          c.sampleRows && c.sampleRows.length ?
            h('pre', {class: 'samples'}, c.sampleRows.join('\n')) : null))) :
      h('p', null, `Not among the failing partitions of ${summaries.length} check` +
          `${summaries.length === 1 ? '' : 's'} (${summaries.map((c) => `${c.name}: ` +
          `${c.passed ? 'passed' : `${c.partitionsFailed || 0} failed`}`).join(', ')})` +
          (summaries.some((c) => num(c.partitionsFailed) > 100) ?
            '; the job lists at most 100 failing partitions per check.' : '.')));
  }

  closePanel() {
    const sel = this.selected;
    navigate(hashOf('backfills', this.id));
    if (sel) {
      const grid = this.grids.get(sel.dataset);
      if (grid) grid.focusPartition(sel.partition);
    }
  }

  async afterAction(updated, action) {
    announce(`${action.label}: job ${this.id} is ${jobStateText(updated.state)}.`);
    await this.reload();
    // The decision's button may be gone with the state that allowed it.
    if (!document.activeElement || document.activeElement === document.body) {
      this.heading.setAttribute('tabindex', '-1');
      this.heading.focus();
    }
  }

  // Everything again (after a decision, at a state change, at the end of
  // the watch).
  async reload() {
    try {
      const job = await api.getBackfill(this.id, 'BACKFILL_VIEW_BASIC', {signal: this.signal});
      this.setJob(job, true);
      this.loadEvents();
      this.loadPartitions(false);
      this.startLive();
    } catch (e) {
      if (e.name !== 'AbortError') announce(`Refresh failed: ${e.message}`);
    }
  }

  startLive() {
    if (this.watching || this.pollTimer || this.signal.aborted) return;
    if (!ACTIVE_JOB_STATES.has(this.job.state)) return;
    this.watch();
    clearInterval(this.timelineTimer);
    this.timelineTimer = setInterval(() => this.renderTimeline(), 1000);
  }

  async watch() {
    this.watching = true;
    this.renderProgress();
    let lastState = this.job.state;
    try {
      await watchBackfill(this.id, {
        signal: this.signal,
        onUpdate: (update) => {
          const counts = JSON.stringify(update.partitions || {});
          const changedCounts = counts !== JSON.stringify(this.job.partitions || {});
          this.setJob(update, false);
          if (update.state !== lastState) {
            lastState = update.state;
            this.reload();
          } else if (changedCounts &&
                     Date.now() - this.lastGridRefresh > GRID_REFRESH_MS) {
            this.loadPartitions(false);
          }
        },
      });
      this.watching = false;
      clearInterval(this.timelineTimer);
      this.reload();
    } catch (e) {
      this.watching = false;
      if (e.name === 'AbortError') return;
      // No stream (refused, cut): poll instead.
      this.poll();
    }
  }

  poll() {
    this.renderProgress();
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(async () => {
      this.pollTimer = 0;
      try {
        const job = await api.getBackfill(this.id, 'BACKFILL_VIEW_BASIC',
            {signal: this.signal});
        const changed = job.state !== this.job.state;
        this.setJob(job, changed);
        if (changed) this.loadEvents();
        this.loadPartitions(false);
        if (ACTIVE_JOB_STATES.has(job.state)) this.poll();
      } catch (e) {
        if (e.name !== 'AbortError') this.poll();
      }
    }, POLL_MS);
  }

  update(params) {
    if (params.id !== this.id) return false;
    if (params.dataset === undefined) {
      this.selected = null;
      this.panel.hidden = true;
      clear(this.panel);
    } else {
      this.selected = {dataset: params.dataset, partition: params.partition || ''};
      if (this.grids.size || this.job) this.showPanel();
    }
    return true;
  }

  unmount() {
    this.abort.abort();
    clearTimeout(this.pollTimer);
    clearInterval(this.timelineTimer);
  }
}

export const jobPage = {
  mount(container, params) {
    const page = new JobPage(container, params);
    if (params.dataset !== undefined) {
      page.selected = {dataset: params.dataset, partition: params.partition || ''};
    }
    return page;
  },
};
