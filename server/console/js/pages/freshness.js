// A dataset's published partitions and how current each is
// (ListDatasetPartitions): counts by standing, a grid of every partition
// coloured by its standing (current, stale, due for a replay, frozen), and
// a table of the partitions of one standing with who published them, when,
// why they are stale and which active job holds them. A cell or a
// partition's name opens its lineage (#/datasets/{name}/partitions/{p}).

import {allPages, api} from '../api.js';
import {h, link, replace, table} from '../dom.js';
import {partitionName} from '../explain.js';
import {fmtInt, richText, timeEl} from '../format.js';
import {PartitionGrid} from '../grid.js';
import {hashOf, navigate} from '../router.js';
import {can} from '../session.js';

// At most this many partitions are drawn (pages of 1000).
const MAX_PAGES = 20;

export const FRESHNESS = [
  ['PARTITION_FRESHNESS_CURRENT', 'current', 'matches its lineage'],
  ['PARTITION_FRESHNESS_STALE', 'stale', 'an input or the transform changed'],
  ['PARTITION_FRESHNESS_DUE', 'due', 'its replay policy replays it'],
  ['PARTITION_FRESHNESS_FROZEN', 'frozen', 'stale, but closed by the frozen rule'],
];
const WORD = new Map(FRESHNESS.map(([value, word]) => [value, word]));

function word(value) {
  return WORD.get(value) || 'current';
}

function versionText(p) {
  if (!p.backfillId) return '';
  return p.kind === 'VERSION_KIND_ROLLBACK' ? 'restored by the rollback of' : 'published by';
}

function cellLabel(p) {
  const name = p.partition === '' ? '(unpartitioned)' : p.partition;
  return `${name}: ${word(p.freshness)}${p.frozen ? ', frozen' : ''}`;
}

const FRESHNESS_LOOK = {
  className: (p) => `cell f-${word(p.freshness)}`,
  label: cellLabel,
  title: (p) => [cellLabel(p),
    p.backfillId ? `${versionText(p)} ${p.backfillId}` : '',
    p.staleReason || '',
    p.heldByBackfillId ? `held by ${p.heldByBackfillId}` : ''].filter(Boolean).join(' · '),
};

function lineageRoute(dataset, partition) {
  return `${hashOf('datasets', dataset, 'partitions')}/${encodeURIComponent(partition)}`;
}

function freshnessLegend(r) {
  return h('ul', {class: 'legend', 'aria-label': 'Partition freshness'},
      FRESHNESS.map(([, w, about]) => h('li', {title: about},
          h('span', {class: `cell f-${w}`, 'aria-hidden': 'true'}),
          `${w} `, h('span', {class: 'count'}, fmtInt(r[w] || 0)))));
}

function partitionsTable(dataset, partitions) {
  return table([
    {label: 'Partition', cell: (p) => link(lineageRoute(dataset, p.partition),
        partitionName(p.partition))},
    {label: 'Freshness', cell: (p) => h('span', {class: `badge fr-${word(p.freshness)}`},
        word(p.freshness) + (p.frozen && word(p.freshness) !== 'frozen' ? ' (frozen)' : ''))},
    {label: 'Why stale', class: 'wrap', cell: (p) => richText(p.staleReason || '')},
    {label: 'Version', cell: (p) => (p.backfillId ? [`${versionText(p)} `,
      link(hashOf('backfills', p.backfillId), p.backfillId)] : '')},
    {label: 'When', cell: (p) => (p.time ? timeEl(p.time) : '')},
    {label: 'Rows', class: 'num', cell: (p) => fmtInt(p.rows || 0)},
    {label: 'Confirmed by', cell: (p) => (p.confirmedByBackfillId ?
      link(hashOf('backfills', p.confirmedByBackfillId), p.confirmedByBackfillId) : '')},
    {label: 'Held by', cell: (p) => (p.heldByBackfillId ?
      link(hashOf('backfills', p.heldByBackfillId), p.heldByBackfillId) : '')},
  ], partitions, {caption: `Partitions of ${dataset}`, empty: 'None.'});
}

// The section's content for `dataset` (a Dataset message), loaded at once.
export function freshnessView(dataset, {signal}) {
  const name = dataset.name;
  const summary = h('div', {'aria-live': 'polite'},
      h('p', {class: 'loading'}, 'Loading partitions…'));
  const gridBox = h('div');
  const filter = h('select', {id: 'freshness-filter', name: 'freshness'},
      h('option', {value: 'not-current'}, 'Not current (stale, due, frozen)'),
      FRESHNESS.map(([value, w]) => h('option', {value}, `Only ${w}`)),
      h('option', {value: ''}, 'All'));
  const tableBox = h('div');
  let records = [];

  const showTable = () => {
    const v = filter.value;
    const rows = records.filter((p) => (v === '' ? true :
      v === 'not-current' ? word(p.freshness) !== 'current' : p.freshness === v));
    replace(tableBox, rows.length > 500 ?
      h('p', null, `The first 500 of ${fmtInt(rows.length)}.`) : null,
    partitionsTable(name, rows.slice(0, 500)));
  };
  filter.addEventListener('change', showTable);

  (async () => {
    try {
      let first = null;
      records = [];
      await allPages((pageToken) => api.listDatasetPartitions(name, {pageSize: 1000, pageToken},
          {signal}), (page) => {
        if (!first) first = page;
        records.push(...(page.partitions || []));
      }, MAX_PAGES);
      const r = first || {};
      const total = Number(r.total || 0);
      replace(summary,
          h('p', null, total === 0 ? 'Nothing was published to this dataset yet.' :
            `${fmtInt(total)} published partition${total === 1 ? '' : 's'}: ` +
            `${fmtInt(r.current || 0)} current, ${fmtInt(r.stale || 0)} stale, ` +
            `${fmtInt(r.due || 0)} due for a replay, ${fmtInt(r.frozen || 0)} frozen.`),
          r.frozenRule ? h('p', null, 'Frozen rule: ', h('code', null, r.frozenRule)) : null,
          h('p', {class: 'muted'}, r.evaluateTime ?
            ['Due as its replay policy found it at ', timeEl(r.evaluateTime), '.'] :
            'No replay policy evaluation: nothing is due.'),
          Number(r.stale || 0) + Number(r.due || 0) > 0 && can('SubmitBackfill') ?
            h('p', null, link(`#/plan?dataset=${encodeURIComponent(name)}&auto=1`,
                'Plan a backfill of the stale partitions')) : null,
          total > records.length ? h('p', null,
              `The first ${fmtInt(records.length)} are drawn.`) : null);
      if (records.length === 0) return;
      const grid = new PartitionGrid({
        dataset: name, grain: dataset.grain, keyColumn: dataset.partitionKeyColumn,
        look: FRESHNESS_LOOK,
        onActivate: (p) => navigate(lineageRoute(name, p.partition)),
      });
      grid.element.setAttribute('aria-label', `Freshness of the partitions of ${name}`);
      grid.setPartitions(records);
      replace(gridBox, freshnessLegend(r), grid.element);
      showTable();
    } catch (e) {
      if (e.name !== 'AbortError') {
        replace(summary, h('p', {class: 'error-box', role: 'alert'}, e.message));
      }
    }
  })();

  return h('div', {class: 'freshness'}, summary, gridBox,
      h('div', {class: 'inline-form'},
          h('label', {for: 'freshness-filter'}, 'Show '), filter),
      tableBox);
}
