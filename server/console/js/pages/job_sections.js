// The sections of the job page that render one part of a job: its timeline
// through the six steps, cost, request, checks, diff, downstream
// confirmations, approval and rollback, and audit trail.

import {allPages, api} from '../api.js';
import {button, dl, h, link, replace, table} from '../dom.js';
import {diffFacts, measuresList, partitionName} from '../explain.js';
import {enumText, fmtCompact, fmtInt, fmtPercent, fmtSeconds,
  grainText, jobStateBadge, jobStateText, num, parseTime, richText,
  scopeText, timeEl} from '../format.js';
import {hashOf} from '../router.js';

const S = (name) => `BACKFILL_STATE_${name}`;

export const STEPS = [
  {n: 1, name: 'Plan', states: [S('QUEUED')],
   about: 'Partitions resolved, costed and queued.'},
  {n: 2, name: 'Pin inputs', states: [],
   about: 'Input fingerprints pinned as the recompute starts (timed with step 3).'},
  {n: 3, name: 'Recompute in staging', states: [S('RUNNING'), S('PAUSED')],
   about: 'Partitions recomputed into staging and checkpointed.'},
  {n: 4, name: 'Validate', states: [S('VALIDATING'), S('AWAITING_APPROVAL'),
                                   S('VALIDATION_FAILED')],
   about: 'Checks and diff over the staged partitions.'},
  {n: 5, name: 'Publish', states: [S('PUBLISHING')],
   about: 'Every partition published atomically.'},
  {n: 6, name: 'Confirm', states: [S('CONFIRMING'), S('DOWNSTREAM_UNHEALTHY')],
   about: 'Downstream consumers invalidated and probed.'},
];

function stepOf(state) {
  const step = STEPS.find((s) => s.states.includes(state));
  return step ? step.n : 0;
}

// Seconds spent in each state, from the job's audit events (each event
// starts its to_state; the last one lasts until the job's end, or now).
export function stateDurations(job, events) {
  const durations = new Map();
  const own = (events || []).filter((e) => !e.subject)
      .sort((a, b) => num(a.seq) - num(b.seq));
  for (let i = 0; i < own.length; i++) {
    const start = parseTime(own[i].time);
    let end;
    if (i + 1 < own.length) {
      end = parseTime(own[i + 1].time);
    } else {
      end = parseTime(job.endTime) ||
          (stepOf(job.state) ? Date.now() : parseTime(job.updateTime));
    }
    if (start === null || end === null) continue;
    const state = own[i].toState;
    durations.set(state, (durations.get(state) || 0) + Math.max(0, end - start) / 1000);
  }
  return durations;
}

// Each step's status: done, current, paused, waiting, failed, cancelled,
// unhealthy, or pending (not reached).
export function stepStatuses(job, events) {
  const state = job.state;
  const visited = new Set((events || []).filter((e) => !e.subject)
      .map((e) => e.toState));
  visited.add(state);
  let reached = 0;
  for (const s of visited) reached = Math.max(reached, stepOf(s));
  const status = new Map();
  let stopAt = 0;
  let stopStatus = '';
  if (state === S('SUCCEEDED') || state === S('ROLLED_BACK')) {
    stopAt = 7;
  } else if (state === S('FAILED') || state === S('CANCELLED')) {
    const last = (events || []).filter((e) => !e.subject && e.toState === state).pop();
    stopAt = (last && stepOf(last.fromState)) || Math.max(reached, 1);
    stopStatus = state === S('FAILED') ? 'failed' : 'cancelled';
  } else if (state === S('VALIDATION_FAILED')) {
    stopAt = 4;
    stopStatus = 'failed';
  } else if (state === S('DOWNSTREAM_UNHEALTHY')) {
    stopAt = 6;
    stopStatus = 'unhealthy';
  } else if (state === S('QUEUED') && reached >= 3) {
    // Resumed or retried: queued to recompute again.
    stopAt = 3;
    stopStatus = 'requeued';
  } else {
    stopAt = Math.max(stepOf(state), 1);
    stopStatus = state === S('PAUSED') ? 'paused' :
        state === S('AWAITING_APPROVAL') ? 'waiting' : 'current';
  }
  const counts = job.partitions || {};
  for (const step of STEPS) {
    let st;
    if (step.n < stopAt) st = 'done';
    else if (step.n === stopAt) st = stopStatus || 'done';
    else st = 'pending';
    status.set(step.n, st);
  }
  // Inputs are pinned before the first partition starts.
  if (stopAt === 3 && (num(counts.total) - num(counts.pending) > 0)) {
    status.set(2, 'done');
  } else if (stopAt === 3) {
    status.set(2, status.get(3));
  }
  return status;
}

const STATUS_TEXT = {
  done: 'done', current: 'in progress', paused: 'paused',
  waiting: 'waiting for approval', failed: 'failed', cancelled: 'cancelled',
  unhealthy: 'downstream unhealthy', pending: 'not reached',
  requeued: 'queued to continue',
};

export function timelineView(job, events) {
  const statuses = stepStatuses(job, events);
  const durations = stateDurations(job, events);
  const time = (states) => {
    let total = 0;
    let any = false;
    for (const s of states) {
      if (durations.has(s)) {
        total += durations.get(s);
        any = true;
      }
    }
    return any ? fmtSeconds(total) : '';
  };
  const list = h('ol', {class: 'timeline'});
  for (const step of STEPS) {
    const st = statuses.get(step.n);
    let spent = '';
    if (step.n === 1) {
      const queued = time([S('QUEUED')]);
      spent = queued ? `queued ${queued}` : '';
    } else if (step.n === 3) {
      const running = time([S('RUNNING')]);
      const paused = time([S('PAUSED')]);
      spent = [running, paused ? `paused ${paused}` : ''].filter(Boolean).join(', ');
    } else if (step.n === 4) {
      const validating = time([S('VALIDATING')]);
      const waiting = time([S('AWAITING_APPROVAL')]);
      spent = [validating, waiting ? `awaiting approval ${waiting}` : '']
          .filter(Boolean).join(', ');
    } else if (step.n !== 2) {
      spent = time(step.states.filter((s) => s !== S('DOWNSTREAM_UNHEALTHY')));
    }
    list.appendChild(h('li', {
      class: `step step-${st}`,
      'aria-current': ['current', 'paused', 'waiting', 'requeued'].includes(st) ?
        'step' : null,
    },
    h('span', {class: 'step-n', 'aria-hidden': 'true'}, String(step.n)),
    h('span', {class: 'step-body'},
        h('span', {class: 'step-name'}, `${step.n}. ${step.name}`),
        h('span', {class: 'step-status'}, STATUS_TEXT[st]),
        spent ? h('span', {class: 'step-time'}, spent) : null,
        h('span', {class: 'visually-hidden'}, ` ${step.about}`))));
  }
  return h('div', null, list, dl([
    ['Created', timeEl(job.createTime)],
    ['Started', job.startTime ? timeEl(job.startTime) : null],
    ['Ended', job.endTime ? timeEl(job.endTime) : null],
    ['Last change', timeEl(job.updateTime)],
  ], 'facts inline'));
}

function bar(label, value, max, className) {
  const fill = h('span', {class: `bar-fill ${className}`});
  fill.style.width = `${max > 0 ? Math.max(0.5, (100 * value) / max) : 0}%`;
  return h('div', {class: 'bar-row'},
      h('span', {class: 'bar-label'}, label),
      h('span', {class: 'bar-track', 'aria-hidden': 'true'}, fill),
      h('span', {class: 'bar-value'}, `${fmtCompact(value)} rows`));
}

export function costView(job) {
  const est = job.costEstimate || {};
  const estimate = num(est.backfill);
  const actual = num(job.actualCost);
  const full = num(est.fullReload);
  const max = Math.max(estimate, actual, full);
  return h('div', null,
      h('div', {class: 'bars', role: 'img', 'aria-label':
          `Input rows: estimated ${fmtInt(estimate)}, read so far ${fmtInt(actual)}, ` +
          `full reload ${fmtInt(full)}`},
      bar('Estimate', estimate, max, 'est'),
      bar('Actual', actual, max, 'act'),
      bar('Full reload', full, max, 'full')),
      dl([
        ['Estimate vs full reload', full ? fmtPercent(est.ratio || estimate / full) : null],
        ['Actual vs estimate', estimate ? fmtPercent(actual / estimate) : null],
        ['Budget (max cost)', num(est.maxCost) ? `${fmtInt(est.maxCost)} rows` : null],
        ['Refused', est.refused ? richText(est.refused) : null],
        ['Rows written to staging', fmtInt(job.rowsWritten)],
      ]),
      job.datasetCosts && job.datasetCosts.length ? table([
        {label: 'Dataset', cell: (c) => link(hashOf('datasets', c.dataset), c.dataset)},
        {label: 'Estimated', class: 'num', cell: (c) => fmtInt(c.estimated)},
        {label: 'Actual', class: 'num', cell: (c) => fmtInt(c.actual)},
        {label: 'Actual / est.', class: 'num', cell: (c) =>
          num(c.estimated) ? fmtPercent(num(c.actual) / num(c.estimated)) : '—'},
        {label: 'Estimated from', cell: (c) => `${enumText(c.source || 'ESTIMATE_SOURCE_UNSPECIFIED',
            'ESTIMATE_SOURCE_')}${num(c.partitionsFromHistory) ?
            ` (${fmtInt(c.partitionsFromHistory)} from history)` : ''}`},
      ], job.datasetCosts, {caption: 'Per dataset (input rows)'}) : null);
}

export function requestView(job) {
  const r = job.request || {};
  return h('div', null, dl([
    ['Dataset', r.dataset ? link(hashOf('datasets', r.dataset), r.dataset) : null],
    ['Scope', scopeText(r, job.requestedPartitionCount)],
    ['Reason', r.reason ? richText(r.reason) : null],
    ['Ticket', r.ticket],
    ['Requested by', r.requestedBy],
    ['Priority', r.priority ? String(r.priority) : null],
    ['Max parallel', r.maxParallel ? String(r.maxParallel) : null],
    ['Max cost', r.maxCost ? `${fmtInt(r.maxCost)} rows` : null],
    ['Frozen partitions', r.overrideFrozen ? 'planned anyway (override_frozen)' : null],
    ['Idempotency key', job.idempotencyKey ? h('code', null, job.idempotencyKey) : null],
  ]), table([
    {label: 'Dataset', cell: (p) => link(hashOf('datasets', p.dataset), p.dataset)},
    {label: 'Grain', cell: (p) => grainText(p.grain, p.partitionKeyColumn)},
    {label: 'Partitions', class: 'num', cell: (p) => fmtInt(p.partitionCount)},
    {label: 'Why', cell: (p) => richText(p.reason)},
    {label: 'Keys', class: 'num', cell: (p) => (num(p.keyCount) ? fmtInt(p.keyCount) : '—')},
  ], job.plan || [], {caption: 'Plan (datasets in plan order)'}));
}

export function checksView(job, partitionHref) {
  const checks = job.checks || [];
  if (checks.length === 0) {
    return h('p', null, 'No check results yet: checks run in step 4 (validate).');
  }
  const summaries = checks.filter((c) => c.summary);
  const failing = checks.filter((c) => !c.summary && !c.passed);
  const others = checks.filter((c) => !c.summary && c.passed);
  const rows = summaries.length ? summaries : others.concat(failing);
  const failuresOf = (c) => failing.filter((f) => f.name === c.name && f.dataset === c.dataset);
  return h('div', null, table([
    {label: 'Check', cell: (c) => [h('code', null, c.name), ` (${c.kind})`]},
    {label: 'Dataset', cell: (c) => c.dataset},
    {label: 'Severity', cell: (c) => enumText(c.severity, 'CHECK_SEVERITY_')},
    {label: 'Result', cell: (c) => h('span', {class: c.passed ? 'ok' : 'bad'},
        c.passed ? '✔ passed' : '✘ failed')},
    {label: 'Observed', cell: (c) => c.observed || ''},
    {label: 'Allowed', cell: (c) => c.allowed || ''},
    {label: 'Partitions', class: 'num', cell: (c) => (c.summary ?
      `${fmtInt(c.partitionsFailed)} of ${fmtInt(c.partitionsChecked)} failed` : '')},
    {label: 'Message', cell: (c) => richText(c.message)},
  ], rows, {caption: 'Validation checks'}),
  summaries.filter((c) => !c.passed).map((c) => {
    const list = failuresOf(c);
    if (list.length === 0) return null;
    return h('details', {class: 'failures'},
        h('summary', null, `Failing partitions of ${c.name} on ${c.dataset} (${list.length}` +
            `${num(c.partitionsFailed) > list.length ? ` of ${fmtInt(c.partitionsFailed)}` : ''})`),
        h('ul', null, list.map((f) => h('li', null,
            link(partitionHref(f.dataset, f.partition || ''), partitionName(f.partition || '')),
            ': ', f.observed ? `observed ${f.observed}` : '',
            f.allowed ? `, allowed ${f.allowed}` : '', f.message ? ' — ' : '',
            richText(f.message),
            f.sampleRows && f.sampleRows.length ? h('pre', {class: 'samples'},
                f.sampleRows.join('\n')) : null))));
  }));
}

export function datasetDiffView(d) {
  return h('div', {class: 'dataset-diff'},
      h('h3', null, d.dataset),
      dl([
        ['Matched by', d.byPrimaryKey ? `primary key (${(d.keyColumns || []).join(', ')})` :
          'whole rows (no primary key)'],
        ['Partitions', `${fmtInt(d.partitionsChanged)} of ${fmtInt(d.partitions)} changed` +
            (num(d.partitionsFailed) ? `, ${fmtInt(d.partitionsFailed)} failed` : '')],
        ['Rows', `${fmtInt(d.rowsBefore)} → ${fmtInt(d.rowsAfter)}`],
        ['Added / removed / changed', `${fmtInt(d.added)} / ${fmtInt(d.removed)} / ` +
            `${fmtInt(d.changed)} (${fmtInt(d.unchanged)} unchanged)`],
      ]),
      measuresList(d.measures));
}

// The diff: dataset totals from the job, partitions from DiffBackfill in
// pages ("Load more").
export function diffSection(job, signal, partitionHref) {
  const body = h('div');
  if (!job.diff || job.diff.length === 0) {
    body.appendChild(h('p', null, 'No diff yet: it is computed in step 4 (validate).'));
    return body;
  }
  body.append(...job.diff.map(datasetDiffView));
  const rows = h('tbody');
  const more = h('div', {class: 'more'});
  const status = h('p', {class: 'hint', 'aria-live': 'polite'});
  const tableEl = h('div', {class: 'table-wrap'}, h('table', {class: 'data'},
      h('caption', null, 'Per partition'),
      h('thead', null, h('tr', null, ['Partition', 'Rows before → after', 'Added',
        'Removed', 'Changed', 'Measures', 'Samples'].map((t) => h('th', {scope: 'col'}, t)))),
      rows));
  body.append(tableEl, status, more);
  const load = async (token) => {
    status.textContent = 'Loading the diff…';
    try {
      const page = await api.diff(job.id, {pageSize: 100, pageToken: token, sampleRows: 3},
          {signal});
      for (const p of page.partitions || []) {
        rows.appendChild(h('tr', null,
            h('td', {'data-label': 'Partition'}, link(partitionHref(p.dataset, p.partition || ''),
                `${p.dataset}/${partitionName(p.partition || '')}`)),
            h('td', {'data-label': 'Rows', class: 'num'},
                p.error ? h('span', {class: 'bad'}, p.error) :
                  `${fmtInt(p.rowsBefore)} → ${fmtInt(p.rowsAfter)}`),
            h('td', {'data-label': 'Added', class: 'num'}, fmtInt(p.added)),
            h('td', {'data-label': 'Removed', class: 'num'}, fmtInt(p.removed)),
            h('td', {'data-label': 'Changed', class: 'num'}, fmtInt(p.changed)),
            h('td', {'data-label': 'Measures'}, measuresList(p.measures) || '—'),
            h('td', {'data-label': 'Samples'}, p.samples && p.samples.length ?
              h('details', null, h('summary', null, `${p.samples.length} rows`),
                  h('pre', {class: 'samples'}, p.samples.map((s) =>
                    `${s.change} [${(s.key || []).join(', ')}]: ` +
                    `(${(s.before || []).join(', ')}) → (${(s.after || []).join(', ')})`)
                      .join('\n'))) : '—')));
      }
      status.textContent = `${rows.children.length} partitions shown` +
          (page.computeTime ? '' : '');
      replace(more, page.nextPageToken ?
        button('Load more partitions', () => load(page.nextPageToken)) : '');
    } catch (e) {
      if (e.name === 'AbortError') return;
      status.textContent = `The diff could not be loaded: ${e.message}`;
    }
  };
  load('');
  return body;
}

export function confirmationsView(job) {
  const list = job.confirmations || [];
  if (list.length === 0) {
    // Step 6 ran (a job that confirmed a consumer lists it): none declared.
    if ([S('SUCCEEDED'), S('DOWNSTREAM_UNHEALTHY'), S('ROLLED_BACK')].includes(job.state)) {
      return h('p', null, 'None: no downstream consumer is declared for the ' +
          'job\'s datasets, so there was nothing to confirm.');
    }
    if ([S('FAILED'), S('CANCELLED'), S('VALIDATION_FAILED')].includes(job.state)) {
      return h('p', null, 'None: the job published nothing, so there was ' +
          'nothing to confirm.');
    }
    return h('p', null, 'No confirmation yet: downstream consumers are ' +
        'confirmed in step 6, after publishing.');
  }
  return table([
    {label: 'Dataset', cell: (c) => c.dataset},
    {label: 'Consumer', cell: (c) => c.consumer},
    {label: 'Result', cell: (c) => h('span', {class: c.healthy ? 'ok' : 'bad'},
        c.healthy ? '✔ healthy' : '✘ unhealthy')},
    {label: 'What it found', cell: (c) => richText(c.message)},
    {label: 'Latency', class: 'num', cell: (c) => fmtSeconds(c.latencySeconds)},
    {label: 'When', cell: (c) => timeEl(c.confirmTime)},
  ], list, {caption: 'Latest confirmation, per consumer'});
}

export function decisionsView(job) {
  const a = job.approval;
  const r = job.rollback;
  if (!a && !r) return null;
  return h('div', null,
      a ? dl([
        ['Approved by', a.approvedBy],
        ['Approval reason', richText(a.reason)],
        ['Approved in state', jobStateText(a.approvedState)],
        ['Override of failed validation', a.overrideValidation ? 'yes' : null],
        ['Approved at', timeEl(a.approveTime)],
      ]) : null,
      r ? dl([
        ['Rolled back by', r.requestedBy],
        ['Rollback reason', richText(r.reason)],
        ['Rolled back at', timeEl(r.time)],
        ['Forced', r.forced ? 'yes' : null],
        ['Rolled back with', r.rolledBackWith ?
          link(hashOf('backfills', r.rolledBackWith), r.rolledBackWith) : null],
        ['Also rolled back', r.alsoRolledBack && r.alsoRolledBack.length ?
          r.alsoRolledBack.map((id, i) => [i ? ', ' : '', link(hashOf('backfills', id), id)]) :
          null],
        ['Restored', `${fmtInt(r.partitionsRestored)} partitions, ${fmtInt(r.rowsRestored)} rows`],
      ]) : null);
}

// Every audit event of the job (oldest first).
export async function loadAudit(id, signal) {
  const events = [];
  await allPages((token) => api.listAuditEvents({backfillId: id, pageSize: 1000,
    pageToken: token}, {signal}), (page) => {
    events.push(...(page.events || []));
  }, 50);
  return events;
}

export function auditView(events) {
  if (events.length === 0) return h('p', null, 'No events.');
  return h('ol', {class: 'audit'}, events.map((e) => h('li', null,
      timeEl(e.time), ' ',
      e.fromState ? [jobStateBadge(e.fromState), ' → '] : 'created → ',
      jobStateBadge(e.toState),
      e.message ? h('span', {class: 'audit-message'}, ' ', richText(e.message)) : null)));
}


