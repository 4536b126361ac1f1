// The Session columns a query's selection needs: hot reads fetch those and no
// more (a sessions page asking five fields reads six columns, not eighteen:
// the readThroughput bench's sessions page serves markedly more requests).
// A field not listed here reads every column: correct, only slower.
import type { SelectionSetNode } from 'graphql';
import { fieldNames, perSelection, subSelections, type Fragments } from './selection.ts';
import type { PartialSessionRow, SessionColumn, SessionRow } from '../store/session-rows.ts';

const LOG: SessionColumn[] = ['eventCount', 'treeId', 'inheritedRanges', 'inheritedEventCount'];

/** Columns each Session field reads from its row (id and createdAt are always read). */
export const COLUMNS_BY_FIELD: Record<string, readonly SessionColumn[]> = {
  __typename: [],
  id: [],
  title: ['title'],
  status: ['status'],
  formatVersion: ['formatVersion'],
  createdAt: [],
  updatedAt: ['updatedAt'],
  eventCount: ['eventCount'],
  turnCount: ['turnCount'],
  lastTurnFailed: ['lastTurnFailed'],
  parent: ['parentId'],
  forkedAtSeq: ['forkedAtSeq'],
  inheritedEventCount: ['inheritedEventCount'],
  firstLiveSeq: ['firstLiveSeq'],
  children: [],
  siblings: ['parentId'],
  forkPoints: [],
  family: ['treeId'],
  // Log reads need the lineage (store/log-as-of.ts) and the length: a Session's
  // fields read the log as of the row's eventCount (store/log-as-of.ts).
  lastAnswer: LOG,
  workspace: LOG,
  tools: [...LOG, 'runner'],
  instructions: LOG,
  files: LOG,
  file: LOG,
  fileChanges: LOG,
  events: LOG,
  search: LOG,
  pendingInputs: [...LOG, 'pendingInputCount'],
  pendingApprovals: [...LOG, 'status'],
  turns: LOG,
  totals: LOG,
  turnAt: LOG,
  lastTurn: LOG,
  model: ['modelProvider', 'modelName'],
  commonPrefix: LOG,
  recording: ['title', 'eventCount', 'runner'],
  runner: ['runner'],
  runnerHolder: ['runner', 'leaseOwner', 'leaseExpiresAt'],
  modelRequest: ['runner'],
};

const ALWAYS: SessionColumn[] = ['id', 'createdAt'];

/** Columns for Session selections; null when one of them asks for a field not mapped above (read them all). */
function columnsOf(sets: SelectionSetNode[], fragments: Fragments): SessionColumn[] | null {
  const names = new Set<string>();
  for (const set of sets) fieldNames(set, fragments, names);
  const columns = new Set(ALWAYS);
  for (const name of names) {
    const cols = COLUMNS_BY_FIELD[name];
    if (!cols) return null;
    for (const c of cols) columns.add(c);
  }
  return [...columns].sort();
}

/**
 * True when a field returning a Session selects nothing but `id` / `__typename`:
 * a relation whose foreign key is at hand is then answered without a read.
 */
export const selectsOnlyId = perSelection((info): boolean => {
  const names = new Set<string>();
  for (const f of info.fieldNodes) fieldNames(f.selectionSet, info.fragments, names);
  return [...names].every((n) => n === 'id' || n === '__typename');
});

/** The columns a field returning a Session (session(id), parent) needs. */
export const sessionColumns = perSelection((info): SessionColumn[] | null =>
  columnsOf(
    info.fieldNodes.flatMap((f) => (f.selectionSet ? [f.selectionSet] : [])),
    info.fragments,
  ),
);

/** The columns a SessionConnection field (sessions, children) needs for its nodes. */
export const sessionConnectionColumns = perSelection((info): SessionColumn[] | null => {
  const edges = info.fieldNodes.flatMap((f) => subSelections(f.selectionSet, 'edges', info.fragments));
  return columnsOf(
    edges.flatMap((e) => subSelections(e, 'node', info.fragments)),
    info.fragments,
  );
});

/**
 * A row read with the columns a selection needs (sessionColumns,
 * sessionConnectionColumns) as the Session type's row: the fields of that
 * selection read only those columns (COLUMNS_BY_FIELD), so the ones the row
 * lacks are never touched.
 */
export function asSelected(row: PartialSessionRow): SessionRow;
export function asSelected(row: PartialSessionRow | null): SessionRow | null;
export function asSelected(row: PartialSessionRow | null): SessionRow | null {
  return row as SessionRow | null;
}
