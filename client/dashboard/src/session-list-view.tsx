// The sessions list's filter and order (sidebar): by status (running, waiting, idle, failed), by when a
// session was created, and sorted by creation, last activity, title or
// status. Filtered-out ancestors of a match stay in the tree, dimmed, for
// context (lineage.ts). The choice is kept in localStorage.
import { useState } from 'preact/hooks';
import type { SessionSummaryFragment } from '../../generated/graphql.ts';

export interface ListView {
  status: 'all' | 'RUNNING' | 'WAITING' | 'IDLE' | 'FAILED';
  created: 'any' | '1d' | '7d' | '30d';
  sort: 'created' | 'updated' | 'title' | 'status';
}

const DEFAULT_VIEW: ListView = { status: 'all', created: 'any', sort: 'created' };
const KEY = 'forkline.listView';
const DAY_MS = 24 * 60 * 60 * 1000;
const CREATED_DAYS: Record<ListView['created'], number> = { any: 0, '1d': 1, '7d': 7, '30d': 30 };

export function useListView(): [ListView, (v: ListView) => void] {
  const [view, setView] = useState<ListView>(() => {
    try {
      return { ...DEFAULT_VIEW, ...(JSON.parse(localStorage.getItem(KEY) ?? '{}') as Partial<ListView>) };
    } catch {
      return DEFAULT_VIEW;
    }
  });
  return [
    view,
    (v) => {
      localStorage.setItem(KEY, JSON.stringify(v));
      setView(v);
    },
  ];
}

/** A session's status as the list shows and filters it: running, waiting (on an approval), failed (its last turn failed) or idle. */
const listStatus = (s: Pick<SessionSummaryFragment, 'status' | 'lastTurnFailed'>): ListView['status'] =>
  s.status === 'RUNNING' || s.status === 'WAITING' ? s.status : s.lastTurnFailed ? 'FAILED' : 'IDLE';

export const isFiltered = (v: ListView) => v.status !== 'all' || v.created !== 'any';

/** What lineageForest takes for this view: the sessions kept, and the order of siblings (default: the fork order). */
export function forestOptions(v: ListView, now = Date.now()) {
  const days = CREATED_DAYS[v.created];
  const keep = isFiltered(v)
    ? (s: SessionSummaryFragment) => (v.status === 'all' || listStatus(s) === v.status) && (!days || now - Date.parse(s.createdAt) <= days * DAY_MS)
    : undefined;
  const order =
    v.sort === 'updated'
      ? (a: SessionSummaryFragment, b: SessionSummaryFragment) => b.updatedAt.localeCompare(a.updatedAt)
      : v.sort === 'title'
        ? (a: SessionSummaryFragment, b: SessionSummaryFragment) =>
            (a.title ?? '').localeCompare(b.title ?? '', undefined, { sensitivity: 'base', numeric: true })
        : v.sort === 'status'
          ? (a: SessionSummaryFragment, b: SessionSummaryFragment) =>
              Number(b.status === 'RUNNING') - Number(a.status === 'RUNNING') || b.updatedAt.localeCompare(a.updatedAt)
          : undefined;
  return { keep, order };
}

export function ListViewControls({ view, onChange }: { view: ListView; onChange(v: ListView): void }) {
  return (
    <div class="list-view" role="group" aria-label="Session list view">
      <label>
        Status
        <select
          aria-label="Filter sessions by status"
          value={view.status}
          onChange={(e) => onChange({ ...view, status: e.currentTarget.value as ListView['status'] })}
        >
          <option value="all">all</option>
          <option value="RUNNING">running</option>
          <option value="WAITING">waiting</option>
          <option value="IDLE">idle</option>
          <option value="FAILED">failed</option>
        </select>
      </label>
      <label>
        Created
        <select
          aria-label="Filter sessions by creation date"
          value={view.created}
          onChange={(e) => onChange({ ...view, created: e.currentTarget.value as ListView['created'] })}
        >
          <option value="any">any time</option>
          <option value="1d">last 24 hours</option>
          <option value="7d">last 7 days</option>
          <option value="30d">last 30 days</option>
        </select>
      </label>
      <label>
        Sort
        <select aria-label="Sort sessions" value={view.sort} onChange={(e) => onChange({ ...view, sort: e.currentTarget.value as ListView['sort'] })}>
          <option value="created">newest first</option>
          <option value="updated">last active</option>
          <option value="title">title A–Z</option>
          <option value="status">running first</option>
        </select>
      </label>
    </div>
  );
}
