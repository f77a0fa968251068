// Plan and submit (#/plan): a form of the BackfillRequest fields, planned
// first (PlanBackfill writes nothing: partitions per dataset with the
// reason of each, cost against a full reload, conflicts, frozen
// partitions, and the blast radius: the datasets and downstream consumers
// the job would touch), then submitted with a reason and ticket under an
// idempotency key made here, so that submitting again after a lost answer
// returns the same job instead of making a second one.

import {api} from '../api.js';
import {showError} from '../dialogs.js';
import {button, dl, field, h, link, replace, section, setFieldError, table} from '../dom.js';
import {partitionName} from '../explain.js';
import {enumText, fmtInt, fmtPercent, grainText, num, richText} from '../format.js';
import {hashOf, navigate} from '../router.js';
import {can} from '../session.js';
import {announce} from '../status.js';

// A version 4 UUID from crypto.getRandomValues (crypto.randomUUID needs a
// secure context; the console may be served over plain HTTP on loopback).
export function newIdempotencyKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-` +
      `${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const SCOPES = [
  ['range', 'A range of partitions [from, to)'],
  ['list', 'Listed partitions'],
  ['affected', 'Partitions affected by rows matching a predicate'],
  ['auto', 'Stale partitions (auto-detect)'],
  ['none', 'The whole dataset (unpartitioned datasets only)'],
];

function lines(text) {
  return text.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);
}

class PlanPage {
  constructor(container, query) {
    this.container = container;
    this.abort = new AbortController();
    this.datasets = [];
    this.planned = null;  // {json}: the scope planned (no reason, ticket)
    this.lastSubmit = null;  // {json, key}: the last submit sent
    this.c = {};
    const c = this.c;
    const add = (name, ...args) => {
      const f = field(...args);
      c[name] = f.control;
      return f.row;
    };
    this.scopeRadios = SCOPES.map(([value, label]) => field(label, 'input', {
      type: 'radio', name: 'scope', value, checked: value === 'range'}));
    this.scopeRows = {};
    const rows = {
      dataset: add('dataset', 'Dataset', 'select', {required: true, 'aria-required': 'true'},
          [['', 'Choose a dataset…']]),
      range: h('div', {class: 'field-pair'},
          add('fromPartition', 'From (inclusive)', 'input', {autocomplete: 'off',
            hint: 'e.g. 2025-03-01'}),
          add('toPartition', 'To (exclusive)', 'input', {autocomplete: 'off',
            hint: 'e.g. 2025-04-01'})),
      list: add('partitions', 'Partitions', 'textarea', {rows: 4,
        hint: 'One per line (or comma-separated).'}),
      affected: add('affectedBy', 'Affected by', 'input', {autocomplete: 'off',
        hint: 'DATASET: PREDICATE, e.g. orders: refund > 0'}),
    };
    this.scopeRows = {range: rows.range, list: rows.list, affected: rows.affected};
    this.keysRow = add('keys', 'Entity keys (optional)', 'textarea', {rows: 2,
      hint: 'Only the rows of these entities are replaced. One per line.'});
    this.keysRow.hidden = true;
    this.grainHint = h('p', {class: 'hint', 'aria-live': 'polite'});
    this.errorBox = h('div', {class: 'error-box', role: 'alert', hidden: true});
    this.result = h('div', {class: 'plan-result', 'aria-live': 'polite'});
    this.submitButton = h('button', {type: 'button', class: 'primary', disabled: true},
        'Submit the backfill');
    this.submitButton.addEventListener('click', () => this.submit());
    const mayOverrideFrozen = can('SubmitBackfill');
    const form = h('form', {class: 'plan-form', novalidate: true},
        rows.dataset, this.grainHint,
        h('fieldset', null, h('legend', null, 'What to recompute'),
            h('div', {class: 'radios'}, this.scopeRadios.map((f) => f.row)),
            rows.range, rows.list, rows.affected),
        this.keysRow,
        h('fieldset', null, h('legend', null, 'Options'),
            add('excludeDownstream', 'Skip the dependents (exclude downstream)', 'input',
                {type: 'checkbox'}),
            mayOverrideFrozen ? add('overrideFrozen',
                'Include partitions closed by a frozen rule (approver role)', 'input',
                {type: 'checkbox'}) : null,
            h('div', {class: 'field-pair'},
                add('priority', 'Priority', 'input', {type: 'number', min: '-1000',
                  max: '1000', step: '1', value: '0', hint: '-1000 to 1000'}),
                add('maxParallel', 'Max parallel', 'input', {type: 'number', min: '0',
                  step: '1', value: '0', hint: '0: no limit of its own'}),
                add('maxCost', 'Max cost (input rows)', 'input', {type: 'number', min: '0',
                  step: 'any', value: '0', hint: '0: no budget of its own'}))),
        h('fieldset', null, h('legend', null, 'Why'),
            add('reason', 'Reason', 'textarea', {rows: 2, 'aria-required': 'true',
              hint: 'Required to submit; recorded in lineage and the audit log.'}),
            add('ticket', 'Ticket', 'input', {autocomplete: 'off'}),
            add('noWait', 'Refuse instead of waiting behind jobs that hold the same ' +
                'partitions (no wait)', 'input', {type: 'checkbox'})),
        this.errorBox,
        h('div', {class: 'form-buttons'},
            h('button', {type: 'submit'}, 'Plan'),
            can('SubmitBackfill') ? this.submitButton : h('p', {class: 'hint'},
                'Your roles do not allow submitting (SubmitBackfill).')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.plan();
    });
    form.addEventListener('input', () => this.formChanged());
    form.addEventListener('change', () => this.formChanged());
    c.dataset.addEventListener('change', () => this.datasetChanged());
    replace(container, h('h1', null, 'Plan a backfill'),
        h('p', null, 'Planning writes nothing. Submit once the plan is what you want.'),
        form, section('Plan', this.result));
    document.title = 'Plan · backfilld';
    this.result.appendChild(h('p', null, 'No plan yet.'));
    this.initial = query;
    this.loadDatasets();
    this.formChanged();
  }

  async loadDatasets() {
    try {
      const r = await api.listDatasets({signal: this.abort.signal});
      this.datasets = r.datasets || [];
      for (const d of this.datasets) {
        if (d.kind === 'DATASET_KIND_SOURCE') continue;
        this.c.dataset.appendChild(h('option', {value: d.name}, d.name));
      }
      const wanted = this.initial.get('dataset');
      if (wanted) this.c.dataset.value = wanted;
      if (this.initial.get('auto')) {
        this.scopeRadios.find((f) => f.control.value === 'auto').control.checked = true;
      }
      this.datasetChanged();
    } catch (e) {
      if (e.name !== 'AbortError') showError(this.errorBox, e);
    }
  }

  dataset() {
    return this.datasets.find((d) => d.name === this.c.dataset.value);
  }

  datasetChanged() {
    const d = this.dataset();
    this.keysRow.hidden = !(d && d.entityKey);
    if (d) {
      const keys = (d.partitionKeys || []).length ?
        ` Keys: ${d.partitionKeys.slice(0, 12).join(', ')}` : '';
      this.grainHint.textContent = `Grain: ${grainText(d.grain, d.partitionKeyColumn)}.${keys}`;
      if (d.grain === 'GRAIN_NONE') this.setScope('none');
    } else {
      this.grainHint.textContent = '';
    }
    this.formChanged();
  }

  setScope(value) {
    for (const f of this.scopeRadios) f.control.checked = f.control.value === value;
  }

  scope() {
    const chosen = this.scopeRadios.find((f) => f.control.checked);
    return chosen ? chosen.control.value : 'range';
  }

  // The BackfillRequest the form describes (defaults left out).
  request() {
    const c = this.c;
    const r = {dataset: c.dataset.value};
    const scope = this.scope();
    if (scope === 'range') {
      r.fromPartition = c.fromPartition.value.trim();
      r.toPartition = c.toPartition.value.trim();
    } else if (scope === 'list') {
      r.partitions = lines(c.partitions.value);
    } else if (scope === 'affected') {
      r.affectedBy = c.affectedBy.value.trim();
    } else if (scope === 'auto') {
      r.autoDetect = true;
    }
    const d = this.dataset();
    if (d && d.entityKey) {
      const keys = lines(c.keys.value);
      if (keys.length) r.keys = keys;
    }
    if (c.excludeDownstream.checked) r.excludeDownstream = true;
    if (c.overrideFrozen && c.overrideFrozen.checked) r.overrideFrozen = true;
    const priority = Number(c.priority.value);
    if (priority) r.priority = priority;
    const maxParallel = Number(c.maxParallel.value);
    if (maxParallel) r.maxParallel = maxParallel;
    const maxCost = Number(c.maxCost.value);
    if (maxCost) r.maxCost = maxCost;
    const reason = c.reason.value.trim();
    if (reason) r.reason = reason;
    const ticket = c.ticket.value.trim();
    if (ticket) r.ticket = ticket;
    for (const key of Object.keys(r)) if (r[key] === '') delete r[key];
    return r;
  }

  // What a plan depends on: the request without its reason and ticket.
  planJson() {
    const {reason, ticket, ...rest} = this.request();
    return JSON.stringify(rest);
  }

  formChanged() {
    const scope = this.scope();
    for (const [name, row] of Object.entries(this.scopeRows)) row.hidden = name !== scope;
    const json = this.planJson();
    const current = this.planned && this.planned.json === json;
    this.submitButton.disabled = !current;
    this.submitButton.title = current ? '' : 'Plan the request as it is first.';
  }

  controlFor(path) {
    const name = path.replace(/^request\./, '').replace(/\[.*$/, '')
        .replace(/_([a-z])/g, (m, ch) => ch.toUpperCase());
    return this.c[name] || null;
  }

  clearErrors() {
    this.errorBox.hidden = true;
    for (const control of Object.values(this.c)) if (control) setFieldError(control, '');
  }

  async plan() {
    this.clearErrors();
    if (!this.c.dataset.value) {
      setFieldError(this.c.dataset, 'Choose a dataset.');
      this.c.dataset.focus();
      return;
    }
    const request = this.request();
    replace(this.result, h('p', {class: 'loading'}, 'Planning…'));
    try {
      const plan = await api.plan(request, {signal: this.abort.signal});
      this.planned = {json: this.planJson()};
      this.renderPlan(plan);
      this.formChanged();
      announce(`Planned ${fmtInt(plan.totalPartitions)} partitions.`);
    } catch (e) {
      if (e.name === 'AbortError') return;
      this.planned = null;
      this.formChanged();
      replace(this.result, h('p', null, 'No plan.'));
      showError(this.errorBox, e, (p) => this.controlFor(p));
    }
  }

  renderPlan(plan) {
    const cost = plan.cost || {};
    const byName = new Map(this.datasets.map((d) => [d.name, d]));
    const planned = plan.datasets || [];
    const consumers = planned.flatMap((p) => ((byName.get(p.dataset) || {}).consumers || [])
        .map((c) => `${p.dataset}: ${c.name}`));
    const conflicts = plan.conflicts || [];
    const frozen = plan.frozen || [];
    replace(this.result, 
        dl([
          ['Partitions', fmtInt(plan.totalPartitions)],
          ['Datasets', `${planned.length} (${planned.map((p) => p.dataset).join(', ')})`],
          ['Estimated cost', `${fmtInt(cost.backfill)} input rows`],
          ['Full reload', `${fmtInt(cost.fullReload)} input rows` +
              (num(cost.fullReload) ? ` (this is ${fmtPercent(cost.ratio)} of it)` : '')],
          ['Budget', num(cost.maxCost) ? `${fmtInt(cost.maxCost)} input rows` : null],
          ['Refused', cost.refused ? h('span', {class: 'bad'}, richText(cost.refused)) : null],
        ]),
        h('h3', null, 'Blast radius'),
        dl([
          ['Datasets rewritten', planned.map((p) => p.dataset).join(', ') || 'none'],
          ['Consumers confirmed after publishing', consumers.join(', ') || 'none'],
          ['Jobs holding planned partitions', conflicts.length ? conflicts.slice(0, 20).map(
              (x, i) => [i ? ', ' : '', link(hashOf('backfills', x.backfillId), x.backfillId),
                ` (${x.dataset}/${partitionName(x.partition || '')})`]) :
            'none: it would start at once'],
          ['Frozen', frozen.length ? frozen.map((f) => `${f.dataset}: ${fmtInt(
              (f.partitions || []).length)} partitions ${f.overridden ? 'planned anyway' :
            'left out'} (${f.rule})`).join('; ') : null],
        ]),
        table([
          {label: 'Dataset', cell: (p) => link(hashOf('datasets', p.dataset), p.dataset)},
          {label: 'Grain', cell: (p) => grainText(p.grain, p.partitionKeyColumn)},
          {label: 'Why', cell: (p) => richText(p.reason)},
          {label: 'Partitions', class: 'num', cell: (p) => fmtInt(p.partitionCount ||
              (p.partitions || []).length)},
          {label: 'Cost', class: 'num', cell: (p) => fmtInt((p.cost || {}).backfill)},
          {label: 'Of full reload', class: 'num', cell: (p) => fmtPercent((p.cost || {}).ratio)},
          {label: 'Estimated from', cell: (p) => enumText(p.estimateSource ||
              'ESTIMATE_SOURCE_UNSPECIFIED', 'ESTIMATE_SOURCE_')},
          {label: 'Keys', class: 'num', cell: (p) => (num(p.keyCount) ? fmtInt(p.keyCount) : '—')},
        ], planned, {caption: 'Datasets in plan order'}),
        planned.map((p) => this.partitionList(p)));
  }

  partitionList(p) {
    const parts = p.partitions || [];
    const reasons = p.partitionReasons || [];
    const shown = parts.slice(0, 1000);
    return h('details', {class: 'plan-partitions'},
        h('summary', null, `Partitions of ${p.dataset} (${fmtInt(parts.length)})`),
        table([
          {label: 'Partition', cell: (i) => partitionName(parts[i])},
          {label: 'Why', cell: (i) => richText(reasons[i] || '')},
        ], shown.map((x, i) => i)),
        parts.length > shown.length ?
          h('p', {class: 'hint'}, `The first ${fmtInt(shown.length)} are shown.`) : null);
  }

  async submit() {
    this.clearErrors();
    if (!this.planned) return;
    if (!this.c.reason.value.trim()) {
      setFieldError(this.c.reason, 'A reason is required to submit.');
      this.c.reason.focus();
      return;
    }
    if (this.submitting) return;
    this.submitting = true;
    this.submitButton.setAttribute('aria-disabled', 'true');
    const body = {request: this.request(), noWait: this.c.noWait.checked || undefined};
    const json = JSON.stringify(body);
    // The same submit again (after a lost answer, a refusal to retry)
    // keeps its key: the daemon answers with the job it already made.
    if (!this.lastSubmit || this.lastSubmit.json !== json) {
      this.lastSubmit = {json, key: newIdempotencyKey()};
    }
    try {
      const r = await api.submit({...body, idempotencyKey: this.lastSubmit.key},
          {signal: this.abort.signal});
      const job = r.backfill || {};
      announce(r.created ? `Submitted ${job.id}.` :
        `This request was submitted before: ${job.id}.`);
      navigate(hashOf('backfills', job.id));
    } catch (e) {
      if (e.name === 'AbortError') return;
      // The key stays: submitting the same request again cannot make a
      // second job.
      showError(this.errorBox, e, (p) => this.controlFor(p));
    } finally {
      this.submitting = false;
      this.submitButton.removeAttribute('aria-disabled');
    }
  }

  unmount() {
    this.abort.abort();
  }
}

export const planPage = {
  mount(container, params, query) {
    return new PlanPage(container, query);
  },
};
