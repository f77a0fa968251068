// The partition grid: one cell per partition of one dataset of a job,
// coloured and patterned by state, laid out as a calendar of the dataset's
// grain: hours in rows of days (24 columns), days in rows of months (31),
// months in rows of years (12), TIME|KEY partitions in rows of times with
// one column per key, anything else (keys, unpartitioned) in rows of 32 in
// plan order. A job of 10,000 partitions is 10,000 small cells.
//
// Keyboard: the grid is one tab stop (roving tabindex, ARIA grid pattern).
// Arrow keys move between cells, Home/End to the ends of a row, Ctrl+Home/
// Ctrl+End to the first and last cell, PageUp/PageDown ten rows; Enter or
// Space opens the cell's partition. Each cell's label says its partition
// and state in words, so colour is never the only signal.

import {h} from './dom.js';
import {PARTITION_STATES, fmtInt, fmtSeconds, num, partitionStateText,
  stateSlug} from './format.js';

const CHUNK = 32;

function calendarLayout(regex, columns, colOf) {
  return {
    columns,
    place(partition) {
      const m = regex.exec(partition);
      if (!m) return null;
      const col = colOf(m);
      if (!(col >= 0 && col < columns)) return null;
      return {row: m[1], col};
    },
  };
}

// How partitions of a grain are placed: {columns, place(p) -> {row, col}
// or null}. Null from place() for any partition falls back to chunks.
function layoutFor(grain, keyColumn, partitions) {
  if (keyColumn) {
    const keys = [...new Set(partitions.map((p) => p.slice(p.lastIndexOf('|') + 1)))]
        .sort();
    if (keys.length > 0 && keys.length <= 48) {
      const index = new Map(keys.map((k, i) => [k, i]));
      return {
        columns: keys.length,
        columnLabels: keys,
        place(partition) {
          const bar = partition.lastIndexOf('|');
          if (bar < 0) return null;
          return {row: partition.slice(0, bar),
                  col: index.get(partition.slice(bar + 1))};
        },
      };
    }
    return null;
  }
  switch (grain) {
    case 'GRAIN_HOUR':
      return calendarLayout(/^(\d{4}-\d{2}-\d{2})T(\d{2})$/, 24, (m) => Number(m[2]));
    case 'GRAIN_DAY':
      return calendarLayout(/^(\d{4}-\d{2})-(\d{2})$/, 31, (m) => Number(m[2]) - 1);
    case 'GRAIN_MONTH':
      return calendarLayout(/^(\d{4})-(\d{2})$/, 12, (m) => Number(m[2]) - 1);
    default:
      return null;
  }
}

// Rows [{label, cells: [{record, col}]}] for the records of one dataset.
function arrange(records, grain, keyColumn) {
  const layout = layoutFor(grain, keyColumn, records.map((r) => r.partition));
  if (layout) {
    const rows = new Map();
    let ok = true;
    for (const record of records) {
      const place = layout.place(record.partition);
      if (!place || place.col === undefined) {
        ok = false;
        break;
      }
      if (!rows.has(place.row)) rows.set(place.row, []);
      rows.get(place.row).push({record, col: place.col});
    }
    if (ok) {
      const keys = [...rows.keys()].sort();
      return {
        columns: layout.columns,
        columnLabels: layout.columnLabels,
        rows: keys.map((key) => ({
          label: key,
          cells: rows.get(key).sort((a, b) => a.col - b.col),
        })),
      };
    }
  }
  const rows = [];
  for (let i = 0; i < records.length; i += CHUNK) {
    const slice = records.slice(i, i + CHUNK);
    rows.push({
      label: records.length <= CHUNK ? '' : `${i + 1}–${i + slice.length}`,
      cells: slice.map((record, j) => ({record, col: j})),
    });
  }
  return {columns: Math.min(CHUNK, Math.max(1, records.length)), rows};
}

function cellLabel(record) {
  const name = record.partition === '' ? '(unpartitioned)' : record.partition;
  return `${name}: ${partitionStateText(record.state)}`;
}

function cellTitle(record) {
  const parts = [cellLabel(record)];
  if (num(record.attempts) > 1) parts.push(`${record.attempts} attempts`);
  if (record.durationSeconds) parts.push(`took ${fmtSeconds(record.durationSeconds)}`);
  if (record.lastError) parts.push(`error: ${record.lastError}`);
  return parts.join(' · ');
}

function stateClass(state) {
  return `cell p-${stateSlug(partitionStateText(state))}`;
}

// A job's partitions, by state.
const STATE_LOOK = {
  className: (record) => stateClass(record.state),
  label: cellLabel,
  title: cellTitle,
};

export class PartitionGrid {
  // dataset: its name; grain, keyColumn: from the job's DatasetPlan;
  // onActivate(record): a cell was clicked or Enter/Space pressed on it;
  // look: how a record is drawn ({className, label, title}(record)), by
  // default its partition state (BackfillPartition records).
  constructor({dataset, grain, keyColumn, onActivate, look = STATE_LOOK}) {
    this.look = look;
    this.dataset = dataset;
    this.grain = grain;
    this.keyColumn = keyColumn;
    this.onActivate = onActivate;
    this.cellsByPartition = new Map();
    this.rows = [];  // [[cell elements by position in row]]
    this.active = null;
    this.element = h('div', {
      class: 'grid',
      role: 'grid',
      'aria-label': `Partitions of ${dataset}`,
      'aria-readonly': 'true',
    });
    this.element.addEventListener('keydown', (e) => this.onKey(e));
    this.element.addEventListener('click', (e) => {
      const cell = e.target.closest('[role=gridcell]');
      if (cell && cell.record) {
        this.setActive(cell, true);
        this.onActivate(cell.record);
      }
    });
  }

  // Builds the grid from the dataset's partitions (BackfillPartition
  // messages, in plan order).
  setPartitions(records) {
    const {columns, columnLabels, rows} = arrange(records, this.grain, this.keyColumn);
    const grid = this.element;
    grid.textContent = '';
    grid.style.setProperty('--cols', String(columns));
    grid.setAttribute('aria-rowcount', String(rows.length + (columnLabels ? 1 : 0)));
    grid.setAttribute('aria-colcount', String(columns + 1));
    this.cellsByPartition.clear();
    this.rows = [];
    const fragment = document.createDocumentFragment();
    if (columnLabels) {
      fragment.appendChild(h('div', {role: 'row', class: 'grid-row grid-head'},
          h('div', {role: 'columnheader', class: 'row-label'}, ''),
          columnLabels.map((label, i) => {
            const el = h('div', {role: 'columnheader', class: 'col-label',
                                 title: label}, label.slice(0, 2));
            el.style.gridColumnStart = String(i + 2);
            return el;
          })));
    }
    rows.forEach((row, r) => {
      const rowEl = h('div', {role: 'row', class: 'grid-row',
                              'aria-rowindex': String(r + 1)},
          h('div', {role: 'rowheader', class: 'row-label'}, row.label));
      const rowCells = [];
      for (const {record, col} of row.cells) {
        const cell = document.createElement('div');
        cell.setAttribute('role', 'gridcell');
        cell.setAttribute('tabindex', '-1');
        cell.setAttribute('aria-colindex', String(col + 2));
        cell.className = this.look.className(record);
        cell.setAttribute('aria-label', this.look.label(record));
        cell.title = this.look.title(record);
        cell.style.gridColumnStart = String(col + 2);
        cell.record = record;
        cell.gridRow = r;
        cell.gridIndex = rowCells.length;
        rowCells.push(cell);
        this.cellsByPartition.set(record.partition, cell);
        rowEl.appendChild(cell);
      }
      this.rows.push(rowCells);
      fragment.appendChild(rowEl);
    });
    grid.appendChild(fragment);
    this.active = null;
    const first = this.rows.length ? this.rows[0][0] : null;
    if (first) this.setActive(first, false);
  }

  // New states for some partitions (same job: the set never changes).
  updateRecords(records) {
    for (const record of records) {
      const cell = this.cellsByPartition.get(record.partition);
      if (!cell) continue;
      const old = cell.record;
      cell.record = record;
      if (old.state !== record.state) {
        cell.className = this.look.className(record);
        cell.setAttribute('aria-label', this.look.label(record));
      }
      cell.title = this.look.title(record);
    }
  }

  has(partition) {
    return this.cellsByPartition.has(partition);
  }

  // Focuses (and makes the tab stop) the cell of `partition`.
  focusPartition(partition) {
    const cell = this.cellsByPartition.get(partition);
    if (cell) this.setActive(cell, true);
  }

  // Makes the cell of `partition` the tab stop without moving focus.
  selectPartition(partition) {
    const cell = this.cellsByPartition.get(partition);
    if (cell) this.setActive(cell, false);
  }

  setActive(cell, focus) {
    if (this.active && this.active !== cell) {
      this.active.setAttribute('tabindex', '-1');
      this.active.classList.remove('active');
    }
    this.active = cell;
    cell.setAttribute('tabindex', '0');
    cell.classList.add('active');
    if (focus) cell.focus();
  }

  // The cell of row `r` nearest to column `col` (aria-colindex).
  nearestIn(r, col) {
    const row = this.rows[r];
    if (!row || row.length === 0) return null;
    let best = row[0];
    for (const cell of row) {
      const c = Number(cell.getAttribute('aria-colindex'));
      const b = Number(best.getAttribute('aria-colindex'));
      if (Math.abs(c - col) < Math.abs(b - col)) best = cell;
    }
    return best;
  }

  onKey(event) {
    const cell = event.target.closest('[role=gridcell]');
    if (!cell || !cell.record) return;
    const r = cell.gridRow;
    const i = cell.gridIndex;
    const row = this.rows[r];
    const col = Number(cell.getAttribute('aria-colindex'));
    let target = null;
    switch (event.key) {
      case 'ArrowRight':
        target = row[i + 1] || (this.rows[r + 1] ? this.rows[r + 1][0] : null);
        break;
      case 'ArrowLeft':
        target = row[i - 1] ||
            (this.rows[r - 1] ? this.rows[r - 1][this.rows[r - 1].length - 1] : null);
        break;
      case 'ArrowDown':
        target = this.nearestIn(r + 1, col);
        break;
      case 'ArrowUp':
        target = this.nearestIn(r - 1, col);
        break;
      case 'PageDown':
        target = this.nearestIn(Math.min(this.rows.length - 1, r + 10), col);
        break;
      case 'PageUp':
        target = this.nearestIn(Math.max(0, r - 10), col);
        break;
      case 'Home':
        target = event.ctrlKey ? this.rows[0][0] : row[0];
        break;
      case 'End': {
        const last = this.rows[this.rows.length - 1];
        target = event.ctrlKey ? last[last.length - 1] : row[row.length - 1];
        break;
      }
      case 'Enter':
      case ' ':
        event.preventDefault();
        this.onActivate(cell.record);
        return;
      default:
        return;
    }
    event.preventDefault();
    if (target) this.setActive(target, true);
  }
}

// The legend: every state's swatch, its name and its count (PartitionCounts
// of the job, or counted from records).
export function legend(counts) {
  return h('ul', {class: 'legend', 'aria-label': 'Partition states'},
      PARTITION_STATES.map(([state, field]) => h('li', null,
          h('span', {class: stateClass(state), 'aria-hidden': 'true'}),
          `${partitionStateText(state)} `,
          h('span', {class: 'count'}, fmtInt(counts ? counts[field] : 0)))));
}

// Counts per PartitionCounts field from BackfillPartition records.
export function countRecords(records) {
  const counts = {total: records.length};
  for (const [, f] of PARTITION_STATES) counts[f] = 0;
  const byState = new Map(PARTITION_STATES);
  for (const r of records) {
    const f = byState.get(r.state);
    if (f) counts[f]++;
  }
  return counts;
}
