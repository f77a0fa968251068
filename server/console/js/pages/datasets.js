// The datasets (#/datasets): each declared dataset with its grain,
// upstreams, consumers, checks and policies (ListDatasets, and
// ListReplayPolicies for the replay policies); one dataset
// (#/datasets/{name}): its declaration (GetDataset), its published
// partitions and how current each is (ListDatasetPartitions), what its replay
// policy last found about its partitions (due, frozen, held, unsettled,
// failed), its recent jobs, and a lookup of any
// partition's lineage (#/datasets/{name}/partitions/{partition}).

import {api} from '../api.js';
import {actionDialog} from '../dialogs.js';
import {button, clear, dl, field, h, link, replace, section, table} from '../dom.js';
import {explainView, partitionName} from '../explain.js';
import {enumText, fmtInt, grainText, jobStateBadge, richText, scopeText,
  timeEl} from '../format.js';
import {freshnessView} from './freshness.js';
import {hashOf, navigate} from '../router.js';
import {can} from '../session.js';
import {announce, showPageError} from '../status.js';

function upstreamText(u) {
  const mapping = enumText(u.mapping || 'PARTITION_MAPPING_UNSPECIFIED', 'PARTITION_MAPPING_');
  return `${u.dataset} (${mapping}${u.mapping === 'PARTITION_MAPPING_LOOKBACK' ?
    ` ${u.lookback || 0}` : ''})`;
}

function policyText(d, policy) {
  const parts = [];
  if (d.requireApproval) parts.push('approval required');
  if (d.maxCost) parts.push(`max cost ${fmtInt(d.maxCost)} rows`);
  if (d.entityKey) parts.push(`entity key ${d.entityKey}`);
  if (d.retention && d.retention.declared) {
    parts.push(`retention ${d.retention.versions || 0} versions` +
        (Number(d.retention.maxAgeSeconds) ?
          `, ${Math.round(Number(d.retention.maxAgeSeconds) / 86400)}d` : ''));
  }
  if (policy) {
    parts.push(`replay on ${(policy.triggers || []).join(', ') || '—'}` +
        `${policy.window ? ` within ${policy.window}` : ''}${policy.paused ? ' (paused)' : ''}`);
    if (policy.frozen) parts.push(`frozen: ${policy.frozen}`);
  }
  return parts.join('; ');
}

const datasetsList = {
  mount(container) {
    const abort = new AbortController();
    const body = h('div', null, h('p', {class: 'loading'}, 'Loading datasets…'));
    replace(container, h('h1', null, 'Datasets'), body);
    document.title = 'Datasets · backfilld';
    Promise.all([
      api.listDatasets({signal: abort.signal}),
      api.listReplayPolicies({signal: abort.signal}).catch(() => ({policies: []})),
    ]).then(([r, p]) => {
      const policies = new Map((p.policies || []).map((x) => [x.dataset, x]));
      replace(body, table([
        {label: 'Dataset', cell: (d) => link(hashOf('datasets', d.name), d.name)},
        {label: 'Kind', cell: (d) => enumText(d.kind, 'DATASET_KIND_')},
        {label: 'Grain', cell: (d) => grainText(d.grain, d.partitionKeyColumn)},
        {label: 'Upstreams', cell: (d) => (d.upstream || []).map(upstreamText).join(', ') || '—'},
        {label: 'Downstream', cell: (d) => (d.downstream || []).join(', ') || '—'},
        {label: 'Consumers', cell: (d) => (d.consumers || []).map((c) => c.name).join(', ') || '—'},
        {label: 'Checks', class: 'num', cell: (d) => String((d.checks || []).length)},
        {label: 'Policies', class: 'wrap', cell: (d) => policyText(d, policies.get(d.name)) || '—'},
      ], r.datasets || [], {caption: 'Declared datasets', empty: 'No datasets declared.'}));
    }).catch((e) => {
      if (e.name !== 'AbortError') showPageError(container, e, 'Datasets could not be loaded');
    });
    return {unmount: () => abort.abort()};
  },
};

function list(items, empty = '—') {
  if (!items || items.length === 0) return empty;
  return items.length > 40 ? `${items.slice(0, 40).join(', ')} … (${items.length} in all)` :
    items.join(', ');
}

function policyView(name, policy, refresh) {
  if (!policy) return h('p', null, 'This dataset declares no replay policy.');
  const e = policy.lastEvaluation;
  const buttons = [];
  if (can('EvaluateReplayPolicy')) {
    buttons.push(button('Evaluate now', async () => {
      try {
        await api.policyAction(name, 'evaluate', {});
        announce(`Replay policy of ${name} evaluated.`);
        refresh();
      } catch (err) {
        announce(`Evaluation failed: ${err.message}`);
      }
    }));
  }
  if (!policy.paused && can('PauseReplayPolicy')) {
    buttons.push(button('Pause replays', async () => {
      const r = await actionDialog({
        title: `Pause the replay policy of ${name}`, confirmLabel: 'Pause',
        description: 'Nothing is submitted for this dataset until it is resumed.',
        fields: [{name: 'reason', label: 'Reason', kind: 'textarea', required: true}],
        submit: (v) => api.policyAction(name, 'pause', v),
      });
      if (r) refresh();
    }));
  }
  if (policy.paused && can('ResumeReplayPolicy')) {
    buttons.push(button('Resume replays', async () => {
      const r = await actionDialog({
        title: `Resume the replay policy of ${name}`, confirmLabel: 'Resume',
        description: 'The policy is evaluated at once.',
        fields: [{name: 'reason', label: 'Reason', kind: 'textarea', required: true,
                  hint: 'Recorded in the audit log.'}],
        submit: (values) => api.policyAction(name, 'resume', values),
      });
      if (r) refresh();
    }));
  }
  return h('div', null,
      dl([
        ['Triggers', (policy.triggers || []).join(', ')],
        ['Window', policy.window],
        ['Settle', policy.settle],
        ['Max cost', policy.maxCost],
        ['Approval required', policy.approvalRequired ? 'yes' : null],
        ['Checked every', policy.checkEvery],
        ['Frozen rule', policy.frozen],
        ['Paused', policy.paused ? `yes: ${policy.pausedReason || ''}` : 'no'],
        ['Last job', policy.lastBackfillId ? [link(hashOf('backfills', policy.lastBackfillId),
            policy.lastBackfillId), ' ', jobStateBadge(policy.lastBackfillState)] : null],
      ]),
      buttons.length ? h('div', {class: 'actions'}, buttons) : null,
      e ? h('div', null, h('h3', null, 'Last evaluation'), dl([
        ['When', timeEl(e.evaluatedAt)],
        ['Outcome', richText(e.outcome)],
        ['Due now', list(e.duePartitions, 'none')],
        ['Frozen (never replayed)', list(e.frozenPartitions, 'none')],
        ['Held by an active job', list(e.heldPartitions, 'none')],
        ['Inputs still settling', list(e.unsettledPartitions, 'none')],
        ['Replay did not succeed', list(e.failedPartitions, 'none')],
        ['Outside the window', list(e.outsideWindow, 'none')],
        ['Stale for another trigger', list(e.notATrigger, 'none')],
        ['Would wait for approval', e.approvalHold || null],
        ['Job', e.backfillId ? link(hashOf('backfills', e.backfillId), e.backfillId) : null],
      ])) : h('p', null, 'Not evaluated yet.'));
}

function lookupForm(dataset) {
  const f = field('Partition', 'input', {name: 'partition', autocomplete: 'off',
    hint: 'In the dataset\'s grain: 2025-03-01, 2025-03-01T05, 2025-03, a key, or TIME|KEY.'});
  const form = h('form', {class: 'inline-form'}, f.row,
      h('button', {type: 'submit'}, 'Explain'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate(`${hashOf('datasets', dataset, 'partitions')}/${encodeURIComponent(f.control.value.trim())}`);
  });
  return form;
}

class DatasetPage {
  constructor(container, params) {
    this.container = container;
    this.name = params.name;
    this.abort = new AbortController();
    this.explain = h('div', {'aria-live': 'polite'});
    this.policy = h('div');
    this.heading = h('h1', null, `Dataset ${this.name}`);
    replace(container, 
        h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'},
            link('#/datasets', 'Datasets'), ' / ', this.name),
        this.heading, h('p', {class: 'loading'}, 'Loading…'));
    document.title = `${this.name} · backfilld`;
    this.params = params;
    this.loaded = false;
    this.load();
  }

  async load() {
    const signal = this.abort.signal;
    try {
      const [d, jobs] = await Promise.all([
        api.getDataset(this.name, {signal}),
        api.listBackfills({dataset: this.name, pageSize: 10}, {signal}).catch(() => ({})),
      ]);
      const derived = d.kind !== 'DATASET_KIND_SOURCE';
      replace(this.container, 
          this.container.firstChild, this.heading,
          derived && can('SubmitBackfill') ? h('p', null,
              link(`#/plan?dataset=${encodeURIComponent(this.name)}`, 'Plan a backfill')) : null,
          section('Declaration', dl([
            ['Kind', enumText(d.kind, 'DATASET_KIND_')],
            ['Table', d.table ? h('code', null, d.table) : null],
            ['Grain', grainText(d.grain, d.partitionKeyColumn)],
            ['Partition column', d.partitionColumn],
            ['Partition keys', list(d.partitionKeys, null)],
            ['Upstreams', list((d.upstream || []).map(upstreamText), 'none')],
            ['Downstream', list(d.downstream, 'none')],
            ['Transform version', d.transformVersion ? h('code', null, d.transformVersion) : null],
            ['Primary key', list(d.primaryKey, null)],
            ['Entity key', d.entityKey],
            ['Approval', d.requireApproval ? 'every job waits for an approval' : null],
            ['Max cost', d.maxCost ? `${fmtInt(d.maxCost)} input rows` : null],
            ['Retention', d.retention ? `${d.retention.versions || 0} rollback copies` +
              (Number(d.retention.maxAgeSeconds) ?
                `, at most ${Math.round(Number(d.retention.maxAgeSeconds) / 86400)} days` : '') +
              (d.retention.declared ? '' : ' (defaults)') : null],
            ['Declared at', d.declaredAt ? h('code', null, d.declaredAt) : null],
          ]),
          (d.columns || []).length ? h('details', null,
              h('summary', null, `Columns (${d.columns.length})`),
              table([{label: 'Column', cell: (c) => h('code', null, c.name)},
                {label: 'Type', cell: (c) => c.type}], d.columns)) : null,
          (d.checks || []).length ? h('div', null, h('h3', null, 'Checks'),
              h('ul', null, d.checks.map((c) => h('li', null, h('code', null, c))))) : null,
          (d.consumers || []).length ? h('div', null, h('h3', null, 'Downstream consumers'),
              table([
                {label: 'Consumer', cell: (c) => c.name},
                {label: 'Kind', cell: (c) => enumText(c.kind, 'CONSUMER_KIND_')},
                {label: 'Invalidate', class: 'mono wrap', cell: (c) => c.invalidate || ''},
                {label: 'Probe', class: 'mono wrap', cell: (c) => c.probe || ''},
                {label: 'Sample', class: 'num', cell: (c) => (c.sample ? String(c.sample) : 'all')},
                {label: 'Timeout', cell: (c) => c.timeout || ''},
              ], d.consumers)) : null),
          derived ? section('Partitions and freshness',
              freshnessView(d, {signal: this.abort.signal})) : null,
          section('Partition lineage', lookupForm(this.name), this.explain),
          section('Freshness (replay policy)', this.policy),
          section('Recent jobs', table([
            {label: 'Job', cell: (j) => link(hashOf('backfills', j.id), j.id)},
            {label: 'State', cell: (j) => jobStateBadge(j.state)},
            {label: 'Scope', cell: (j) => scopeText(j.request, j.requestedPartitionCount)},
            {label: 'Reason', class: 'wrap', cell: (j) => (j.request || {}).reason || ''},
            {label: 'Created', cell: (j) => timeEl(j.createTime)},
          ], jobs.backfills || [], {empty: 'No job touched this dataset.'}),
          h('p', null, link(`#/backfills?dataset=${encodeURIComponent(this.name)}`,
              'All jobs of this dataset'))));
      this.loadPolicy();
      this.loaded = true;
      this.update(this.params);
    } catch (e) {
      if (e.name !== 'AbortError') showPageError(this.container, e, `Dataset ${this.name}`);
    }
  }

  async loadPolicy() {
    try {
      const r = await api.listReplayPolicies({signal: this.abort.signal});
      const policy = (r.policies || []).find((p) => p.dataset === this.name);
      replace(this.policy, policyView(this.name, policy, () => this.loadPolicy()));
    } catch (e) {
      if (e.name !== 'AbortError') {
        replace(this.policy, h('p', {class: 'error-box'}, e.message));
      }
    }
  }

  update(params) {
    if (params.name !== this.name) return false;
    this.params = params;
    if (!this.loaded) return true;
    if (params.partition === undefined) {
      clear(this.explain);
      return true;
    }
    const partition = params.partition;
    replace(this.explain, h('p', {class: 'loading'}, 'Loading lineage…'));
    api.explainPartition(this.name, partition, {signal: this.abort.signal}).then((r) => {
      const headingEl = h('h3', {tabindex: '-1'}, `${this.name}/${partitionName(partition)}`);
      replace(this.explain, headingEl, explainView(r));
      headingEl.focus();
    }).catch((e) => {
      if (e.name === 'AbortError') return;
      replace(this.explain, h('div', {class: 'error-box', role: 'alert'}, e.message));
    });
    return true;
  }

  unmount() {
    this.abort.abort();
  }
}

const datasetPage = {
  mount(container, params) {
    return new DatasetPage(container, params);
  },
};

export {datasetsList, datasetPage};
