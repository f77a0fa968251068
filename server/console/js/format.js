// Formatting of the API's canonical JSON for people: enum names, int64
// strings, timestamps (RFC 3339), durations and costs.

import {h} from './dom.js';

export const JOB_STATES = [
  'BACKFILL_STATE_QUEUED', 'BACKFILL_STATE_RUNNING',
  'BACKFILL_STATE_VALIDATING', 'BACKFILL_STATE_AWAITING_APPROVAL',
  'BACKFILL_STATE_PUBLISHING', 'BACKFILL_STATE_CONFIRMING',
  'BACKFILL_STATE_SUCCEEDED', 'BACKFILL_STATE_FAILED',
  'BACKFILL_STATE_CANCELLED', 'BACKFILL_STATE_PAUSED',
  'BACKFILL_STATE_ROLLED_BACK', 'BACKFILL_STATE_VALIDATION_FAILED',
  'BACKFILL_STATE_DOWNSTREAM_UNHEALTHY',
];

// Jobs in these states change by themselves: the console watches them.
export const ACTIVE_JOB_STATES = new Set([
  'BACKFILL_STATE_QUEUED', 'BACKFILL_STATE_RUNNING',
  'BACKFILL_STATE_VALIDATING', 'BACKFILL_STATE_PUBLISHING',
  'BACKFILL_STATE_CONFIRMING', 'BACKFILL_STATE_PAUSED',
  'BACKFILL_STATE_AWAITING_APPROVAL',
]);

// The partition states in the order of the legend, each with its
// PartitionCounts field.
export const PARTITION_STATES = [
  ['PARTITION_STATE_PENDING', 'pending'],
  ['PARTITION_STATE_RUNNING', 'running'],
  ['PARTITION_STATE_STAGED', 'staged'],
  ['PARTITION_STATE_PUBLISHED', 'published'],
  ['PARTITION_STATE_UNCHANGED', 'unchanged'],
  ['PARTITION_STATE_SKIPPED', 'skipped'],
  ['PARTITION_STATE_FAILED', 'failed'],
  ['PARTITION_STATE_CANCELLED', 'cancelled'],
];

// "BACKFILL_STATE_AWAITING_APPROVAL" -> "awaiting approval".
export function enumText(value, prefix) {
  if (!value) return 'unspecified';
  let text = String(value);
  if (prefix && text.startsWith(prefix)) text = text.slice(prefix.length);
  return text.toLowerCase().replace(/_/g, ' ');
}

export function jobStateText(state) {
  return enumText(state || 'BACKFILL_STATE_UNSPECIFIED', 'BACKFILL_STATE_');
}

export function partitionStateText(state) {
  return enumText(state || 'PARTITION_STATE_UNSPECIFIED', 'PARTITION_STATE_');
}

// The CSS class suffix of a state: "awaiting-approval".
export function stateSlug(text) {
  return text.replace(/ /g, '-');
}

// A badge with the state's words (colour is never the only signal).
export function jobStateBadge(state) {
  const text = jobStateText(state);
  return h('span', {class: `badge job-${stateSlug(text)}`}, text);
}

export function grainText(grain, keyColumn) {
  const text = enumText(grain || 'GRAIN_UNSPECIFIED', 'GRAIN_');
  if (keyColumn) return `${text} × ${keyColumn}`;
  return grain === 'GRAIN_NONE' ? 'unpartitioned' : text;
}

// int64 fields arrive as strings, doubles as numbers; absent means 0.
export function num(value) {
  if (value === undefined || value === null || value === '') return 0;
  const n = Number(value);
  return Number.isFinite(n) ? n : 0;
}

const intFormat = new Intl.NumberFormat('en-US', {maximumFractionDigits: 0});
const decFormat = new Intl.NumberFormat('en-US', {maximumFractionDigits: 2});

export function fmtInt(value) {
  return intFormat.format(num(value));
}

export function fmtNumber(value) {
  return decFormat.format(num(value));
}

// 1234567 -> "1.23M": costs (input rows).
export function fmtCompact(value) {
  const n = num(value);
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${decFormat.format(n / 1e9)}B`;
  if (abs >= 1e6) return `${decFormat.format(n / 1e6)}M`;
  if (abs >= 1e4) return `${decFormat.format(n / 1e3)}k`;
  return decFormat.format(n);
}

export function fmtPercent(ratio) {
  return `${decFormat.format(num(ratio) * 100)}%`;
}

export function fmtSigned(value) {
  const n = num(value);
  return n > 0 ? `+${decFormat.format(n)}` : decFormat.format(n);
}

// Seconds -> "2h 3m", "4m 10s", "12.5s".
export function fmtSeconds(seconds) {
  let s = num(seconds);
  if (s < 0) s = 0;
  if (s < 60) return `${s < 10 ? decFormat.format(s) : Math.round(s)}s`;
  const d = Math.floor(s / 86400);
  const hr = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = Math.floor(s % 60);
  if (d > 0) return `${d}d ${hr}h`;
  if (hr > 0) return `${hr}h ${m}m`;
  return `${m}m ${sec}s`;
}

// A Duration's JSON ("1.5s") -> seconds.
export function durationSeconds(text) {
  if (!text) return 0;
  const match = /^(-?[0-9.]+)s$/.exec(String(text));
  return match ? Number(match[1]) : 0;
}

export function parseTime(text) {
  if (!text) return null;
  const t = Date.parse(text);
  return Number.isNaN(t) ? null : t;
}

// A timestamp as a <time> element: local time, UTC in its title.
export function timeEl(text) {
  const t = parseTime(text);
  if (t === null) return '—';
  const date = new Date(t);
  const local = date.toLocaleString('en-GB', {
    year: 'numeric', month: 'short', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
  return h('time', {datetime: text, title: date.toISOString()}, local);
}

// Seconds between two RFC 3339 timestamps (end: now when absent).
export function secondsBetween(start, end) {
  const a = parseTime(start);
  if (a === null) return null;
  const b = end ? parseTime(end) : Date.now();
  return b === null ? null : Math.max(0, (b - a) / 1000);
}

// Text that names API fields and methods in backquotes ("publish with
// `ApproveBackfill`"): the names set as code.
export function richText(text) {
  const parts = String(text || '').split('`');
  return parts.map((part, i) => (i % 2 === 1 ? h('code', null, part) : part));
}

// The scope of a request, in one line.
export function scopeText(request, requestedCount) {
  if (!request) return '';
  const parts = [];
  if (request.fromPartition || request.toPartition) {
    parts.push(`[${request.fromPartition || ''}, ${request.toPartition || ''})`);
  }
  const listed = num(requestedCount) ||
      (request.partitions ? request.partitions.length : 0);
  if (listed) parts.push(`${fmtInt(listed)} listed partition${listed === 1 ? '' : 's'}`);
  if (request.affectedBy) parts.push(`affected by ${request.affectedBy}`);
  if (request.autoDetect) parts.push('stale partitions (auto)');
  if (request.keys && request.keys.length) {
    parts.push(`${fmtInt(request.keys.length)} entity keys`);
  }
  if (parts.length === 0) parts.push('whole dataset');
  if (request.excludeDownstream) parts.push('without downstream');
  return parts.join('; ');
}
