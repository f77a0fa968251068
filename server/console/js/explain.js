// What ExplainPartition says about one partition: every version lineage
// recorded (publishes and rollbacks, newest first) with its job, reason,
// ticket, who asked and approved, transform version, input fingerprints,
// rows, output fingerprint, diff and the checks its job's validation ran on
// the partition; and whether it is stale now. Used by the job page's
// partition panel and the dataset page's lookup.

import {api} from './api.js';
import {dl, h, link, replace, table} from './dom.js';
import {enumText, fmtInt, fmtNumber, fmtSigned, jobStateBadge, num, richText,
  timeEl} from './format.js';
import {hashOf} from './router.js';

export function partitionName(partition) {
  return partition === '' ? '(unpartitioned)' : partition;
}

function inputsTable(inputs, caption) {
  return table([
    {label: 'Input', cell: (i) => `${i.dataset}/${partitionName(i.partition || '')}`},
    {label: 'Fingerprint', class: 'mono', cell: (i) => i.fingerprint || '—'},
    {label: 'Rows', class: 'num', cell: (i) => fmtInt(i.rows)},
  ], inputs || [], {caption, empty: 'No inputs recorded.'});
}

export function diffFacts(diff) {
  if (!diff) return null;
  if (diff.error) return h('p', {class: 'warning'}, `Diff failed: ${diff.error}`);
  return h('div', null,
      dl([
        ['Rows', `${fmtInt(diff.rowsBefore)} → ${fmtInt(diff.rowsAfter)}`],
        ['Added', fmtInt(diff.added)],
        ['Removed', fmtInt(diff.removed)],
        ['Changed', fmtInt(diff.changed)],
        ['Unchanged', fmtInt(diff.unchanged)],
      ]),
      measuresList(diff.measures));
}

export function measuresList(measures) {
  if (!measures || measures.length === 0) return null;
  return h('ul', {class: 'measures'}, measures.map((m) => h('li', null,
      h('code', null, m.column),
      `: ${fmtNumber(m.before)} → ${fmtNumber(m.after)} (Δ ${fmtSigned(m.delta)})`)));
}

// One check result of a version (PartitionVersion.checks): the partition's
// own result, "passed" derived from a complete summary, a summary when the
// job kept only some of the failing partitions, or a result about the whole
// dataset. The outcome is a word in a badge, never a colour alone.
function checkItem(c) {
  const failed = num(c.partitionsFailed);
  let outcome;
  if (c.summary) {
    outcome = failed > 0 ? ['not kept', 'check-unknown'] : ['not checked', 'check-unknown'];
  } else {
    outcome = c.passed ? ['passed', 'check-passed'] : ['failed', 'check-failed'];
  }
  const notes = [enumText(c.severity, 'CHECK_SEVERITY_')];
  if (!c.summary && !c.partition) notes.push('whole dataset');
  let detail;
  if (c.summary) {
    detail = failed > 0 ?
      `: ${fmtInt(failed)} of ${fmtInt(c.partitionsChecked)} partitions failed; this ` +
        'partition\'s outcome was not kept (a job keeps at most 100 failing partitions ' +
        'per check)' :
      ': no partition was checked';
  } else if (c.passed) {
    detail = c.observed ? `: ${c.observed}` : '';
  } else {
    detail = [c.observed ? `: observed ${c.observed}` : '',
      c.allowed ? `; allowed ${c.allowed}` : '',
      c.message ? [' — ', richText(c.message)] : ''];
  }
  return h('li', {class: 'check'},
      h('span', {class: `badge ${outcome[1]}`}, outcome[0]), ' ',
      h('code', null, c.name), ` (${notes.join(', ')})`, detail,
      !c.passed && c.sampleRows && c.sampleRows.length ?
        h('pre', {class: 'samples'}, c.sampleRows.join('\n')) :
        null);
}

export function checksList(checks) {
  if (!checks || checks.length === 0) return null;
  return h('ul', {class: 'checks-list'}, checks.map(checkItem));
}

function versionItem(v) {
  const kind = v.kind === 'VERSION_KIND_ROLLBACK' ? 'Rollback' : 'Publish';
  const approval = v.approval ? [
    `${v.approval.approvedBy || 'unknown'}: ${v.approval.reason || ''}`,
    v.approval.overrideValidation ? ' (override of failed validation)' : '',
  ] : null;
  return h('li', {class: 'version'},
      h('h4', null, `${kind} by `,
          v.backfillId ? link(hashOf('backfills', v.backfillId), v.backfillId) : '—',
          ' ', v.state ? jobStateBadge(v.state) : null, ' · ', timeEl(v.publishTime)),
      dl([
        ['Reason', v.reason ? richText(v.reason) : null],
        ['Ticket', v.ticket],
        ['Requested by', v.requestedBy],
        ['Approved', approval],
        ['Transform version', v.transformVersion ? h('code', null, v.transformVersion) : null],
        ['Rows', fmtInt(v.rows)],
        ['Output fingerprint', v.outputFingerprint ?
          h('code', null, v.outputFingerprint) : null],
        ['Entity keys', v.keys && v.keys.length ? v.keys.join(', ') : null],
        ['Checks', checksList(v.checks)],
      ]),
      v.inputs && v.inputs.length ? h('details', null,
          h('summary', null, `Input fingerprints (${v.inputs.length})`),
          inputsTable(v.inputs)) : null,
      v.diff ? h('details', null, h('summary', null, 'Diff of this publish'),
          diffFacts(v.diff)) : null);
}

// The explanation as nodes.
export function explainView(response) {
  const versions = response.versions || [];
  return h('div', {class: 'explain'},
      response.stale ? h('div', {class: 'warning', role: 'note'},
          h('strong', null, 'Stale: '), richText(response.staleReason),
          response.staleInputs && response.staleInputs.length ? h('ul', null,
              response.staleInputs.map((s) => h('li', null,
                  `${s.dataset}/${partitionName(s.partition || '')} `,
                  s.backfillId ? ['replaced by ', link(hashOf('backfills', s.backfillId),
                      s.backfillId), ` (${enumText(s.kind, 'VERSION_KIND_')}) `] : '',
                  s.time ? timeEl(s.time) : '',
                  s.excludedDownstream ? ' with exclude_downstream' : ''))) : null) :
        h('p', null, versions.length ? 'Not stale: its inputs are as they were read.' : ''),
      versions.length === 0 ?
        h('p', null, 'Never published: lineage has no version of this partition.') :
        h('ol', {class: 'versions', 'aria-label': 'Versions, newest first'},
            versions.map(versionItem)));
}

// Loads and renders the explanation of dataset/partition into `target`.
export async function loadExplain(target, dataset, partition, signal) {
  replace(target, h('p', {class: 'loading'}, 'Loading lineage…'));
  try {
    const response = await api.explainPartition(dataset, partition, {signal});
    replace(target, explainView(response));
  } catch (e) {
    if (e.name === 'AbortError') return;
    replace(target, h('p', {class: 'error-box', role: 'alert'}, e.message));
  }
}

// What the job recorded for one of its partitions (BackfillPartition).
export function jobRecordView(record) {
  if (!record) return null;
  return h('div', null,
      dl([
        ['State in this job', enumText(record.state, 'PARTITION_STATE_')],
        ['Why planned', record.reason ? richText(record.reason) : null],
        ['Attempts', record.attempts ? String(record.attempts) : '0'],
        ['Last error', record.lastError ? h('span', {class: 'error-text'}, record.lastError) : null],
        ['Rows written', fmtInt(record.rowsWritten)],
        ['Input rows', fmtInt(record.inputRows)],
        ['Duration', record.durationSeconds ? `${Number(record.durationSeconds).toFixed(2)}s` : null],
        ['Output fingerprint', record.outputFingerprint ?
          h('code', null, record.outputFingerprint) : null],
        ['Updated', record.updateTime ? timeEl(record.updateTime) : null],
      ]),
      record.inputs && record.inputs.length ? h('details', null,
          h('summary', null, `Pinned inputs (${record.inputs.length})`),
          inputsTable(record.inputs)) : null);
}
