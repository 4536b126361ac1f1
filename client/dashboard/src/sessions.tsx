// The sidebar: every session as a lineage tree, kept live by sessionListChanges,
// with full-text search (search.tsx) and recording import (recording-import.tsx).
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  CreateSessionDocument,
  SessionListChangesDocument,
  SessionsChangedSinceDocument,
  SessionsDeletedDocument,
  SessionsDocument,
  type SessionSummaryFragment,
} from '../../generated/graphql.ts';
import { follow, forkline, oneAtATime } from './api.ts';
import { NewSessionDialog, type NewSessionChoice } from './dialogs.tsx';
import { focusComposerOf } from './composer.tsx';
import { distinctTitle, lineageForest, type LineageNode } from './lineage.ts';
import { navigate, sessionPath } from './router.ts';
import { shownName } from './format.ts';
import { SearchResults } from './search.tsx';
import { ImportButton } from './recording-import.tsx';
import { forestOptions, isFiltered, ListViewControls, useListView } from './session-list-view.tsx';
import { errorText, StatusBadge } from './widgets.tsx';
import { useVirtualizer } from './use-virtualizer.ts';
import { visibleText } from '../../../src/core/visible-text.ts';

const PAGE = 500;
/**
 * A list back from a lost connection asks for what changed since the newest
 * change it held, less this: a change is stamped when its transaction starts
 * and becomes visible when it commits, a moment later.
 */
const RESUME_MARGIN_MS = 30_000;

/** The newest change a list holds (updatedAt is the server's clock, never the browser's). */
function newestChange(sessions: Iterable<SessionSummaryFragment>): string | null {
  let newest: string | null = null;
  for (const s of sessions) if (newest === null || Date.parse(s.updatedAt) > Date.parse(newest)) newest = s.updatedAt;
  return newest;
}

/** All sessions by id; loaded page by page, then updated by sessionListChanges and sessionsDeleted. */
export function useSessions() {
  const [sessions, setSessions] = useState<ReadonlyMap<string, SessionSummaryFragment>>(new Map());
  const [error, setError] = useState<string | null>(null);
  // The list is known (its first full read succeeded): only then may an empty list say "no sessions".
  const [loaded, setLoaded] = useState(false);
  const held = useRef(sessions);
  held.current = sessions;

  useEffect(() => {
    let cancelled = false;
    // A change notified just before a deletion may arrive after it: deleted ids stay out.
    const deleted = new Set<string>();
    const upsert = (list: SessionSummaryFragment[]) =>
      setSessions((prev) => {
        const next = new Map(prev);
        for (const s of list) {
          if (deleted.has(s.id)) continue;
          const old = next.get(s.id);
          // Live updates may overtake the initial load: keep the newer row.
          if (!old || old.updatedAt <= s.updatedAt || old.eventCount <= s.eventCount) next.set(s.id, s);
        }
        return next;
      });
    // Rows that arrived live while a (re)load ran: a reload keeps them even when its pages missed them.
    let liveDuringLoad: Set<string> | null = null;
    let loadedOnce = false;
    // The list is read over HTTP and followed over the WebSocket, and nothing orders the two: the server may
    // start listening after the read was answered, and a session made or changed in between would not show
    // until it changed again (docs/api.md, sessionListChanges). So the subscription's first result, sent once it
    // listens (after each resubscribe too: nothing changed meanwhile is replayed), has what changed since the
    // newest change held read again (catchUp: those sessions only, not the whole list; an empty list, a new
    // tenant's, is read whole).
    let unsubscribe = () => {};
    const startLive = () => {
      if (cancelled) return;
      unsubscribe = follow(() => forkline.subscribe(SessionListChangesDocument), {
        next: ({ sessionListChanges: { listening, session } }) => {
          setError(null);
          if (listening) catchUpSoon();
          if (!session) return;
          liveDuringLoad?.add(session.id);
          upsert([session]);
        },
        error: (err) => setError(`live updates: ${errorText(err)}`),
        reconnecting: () => setError('live updates: reconnecting…'),
        resumed: () => setError(null),
      });
    };
    const unsubscribeDeleted = follow(() => forkline.subscribe(SessionsDeletedDocument), {
      next: ({ sessionsDeleted: { deletedSessionIds } }) =>
        setSessions((prev) => {
          const next = new Map(prev);
          for (const id of deletedSessionIds) {
            deleted.add(id);
            next.delete(id);
          }
          return next;
        }),
      error: (err) => setError(`live updates: ${errorText(err)}`),
    });
    const load = async (replace: boolean) => {
      const seen = new Set<string>();
      liveDuringLoad = new Set();
      let after: string | null | undefined;
      do {
        const r = await forkline.query(SessionsDocument, { first: PAGE, after });
        if (cancelled) return;
        const rows = r.sessions.edges.map((e) => e.node);
        for (const row of rows) seen.add(row.id);
        upsert(rows);
        after = r.sessions.pageInfo.hasNextPage ? r.sessions.pageInfo.endCursor : null;
      } while (after);
      const keep = liveDuringLoad;
      liveDuringLoad = null;
      if (replace)
        setSessions((prev) => {
          const next = new Map(prev);
          for (const id of prev.keys()) if (!seen.has(id) && !keep.has(id)) next.delete(id);
          return next;
        });
      loadedOnce = true;
      setLoaded(true);
      setError(null);
    };
    // What changed since the newest change held; a deletion while away is seen by the count
    // (sessionsDeleted does not replay either): then, and only then, the whole list is read again.
    const catchUp = async () => {
      const newest = newestChange(held.current.values());
      if (newest === null || !loadedOnce) return load(true);
      const since = new Date(Date.parse(newest) - RESUME_MARGIN_MS).toISOString();
      let count: number;
      let after: string | null | undefined;
      do {
        const r = await forkline.query(SessionsChangedSinceDocument, { since, first: PAGE, after });
        if (cancelled) return;
        count = r.sessionCount;
        upsert(r.sessions.edges.map((e) => e.node));
        after = r.sessions.pageInfo.hasNextPage ? r.sessions.pageInfo.endCursor : null;
      } while (after);
      // The state update above is applied on the next render: compare once it has been.
      await new Promise((resolve) => setTimeout(resolve));
      if (!cancelled && held.current.size !== count) await load(true);
    };
    // One catch-up at a time, and one more queued when asked meanwhile.
    const catchUpSoon = oneAtATime(
      () => catchUp().catch((err) => void (!cancelled && setError(errorText(err)))),
      () => cancelled,
    );
    // The subscription starts once the first read is in (and rendered: held.current has its rows, the newest
    // change to catch up from); a failed first read is read again once the subscription listens (after resuming).
    void load(false)
      .catch((err) => !cancelled && setError(`Sessions could not be loaded: ${errorText(err)}`))
      .then(() => new Promise((resolve) => setTimeout(resolve)))
      .then(startLive);
    return () => {
      cancelled = true;
      unsubscribe();
      unsubscribeDeleted();
    };
  }, []);

  return { sessions, error, loaded, add: (s: SessionSummaryFragment) => setSessions((prev) => new Map(prev).set(s.id, s)) };
}

export function Sidebar(props: {
  sessions: ReadonlyMap<string, SessionSummaryFragment>;
  error: string | null;
  loaded: boolean;
  currentId?: string;
  onImported(s: SessionSummaryFragment): void;
}) {
  const [search, setSearch] = useState('');
  const [creating, setCreating] = useState(false);
  const [importError, setImportError] = useState<{ file: string; message: string } | null>(null);
  const create = async ({ title, model }: NewSessionChoice) => {
    const { createSession } = await forkline.mutate(CreateSessionDocument, { input: { title: title || null, model } });
    props.onImported(createSession);
    setCreating(false);
    focusComposerOf(createSession.id); // Create → type: the new session's composer takes the focus
    navigate(sessionPath(createSession.id));
  };
  const query = search.trim();
  const [view, setView] = useListView();
  const forest = useMemo(() => lineageForest(props.sessions.values(), '', forestOptions(view)), [props.sessions, view]);
  const treeRef = useRef<HTMLElement>(null);
  return (
    <aside class="sidebar">
      <header class="sidebar-head">
        <a href="/" class="brand">
          forkline
        </a>
      </header>
      <div class="sidebar-actions">
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          New session
        </button>
        <ImportButton onImported={props.onImported} onError={setImportError} />
      </div>
      {creating && <NewSessionDialog onCreate={create} onClose={() => setCreating(false)} />}
      {importError && <ImportErrorBanner {...importError} onDismiss={() => setImportError(null)} />}
      <input
        class="search"
        type="search"
        placeholder="Search sessions…"
        aria-label="Search titles, inputs and answers"
        value={search}
        onInput={(e) => setSearch(e.currentTarget.value)}
      />
      {!query && <ListViewControls view={view} onChange={setView} />}
      {props.error && <p class="error">{props.error}</p>}
      {query ? (
        <SearchResults query={query} currentId={props.currentId} />
      ) : (
        <nav class="tree" aria-label="Sessions" ref={treeRef}>
          {forest.length ? (
            <SessionTree forest={forest} currentId={props.currentId} scrollElement={treeRef} />
          ) : isFiltered(view) && props.sessions.size ? (
            <p class="muted">No session matches the filter.</p>
          ) : props.loaded ? (
            <p class="muted">No sessions yet: start a new session or import a recording.</p>
          ) : props.error ? null : (
            <p class="muted">Loading sessions…</p>
          )}
        </nav>
      )}
    </aside>
  );
}

/** A forest as the rows it shows, parents before their children, each with its depth. */
export function treeRows(forest: readonly LineageNode[]): Array<{ node: LineageNode; depth: number }> {
  const rows: Array<{ node: LineageNode; depth: number }> = [];
  const walk = (nodes: readonly LineageNode[], depth: number) => {
    for (const node of nodes) {
      rows.push({ node, depth });
      walk(node.children, depth + 1);
    }
  };
  walk(forest, 0);
  return rows;
}

/** A row's height before it is measured (title line and meta line). */
const ROW_ESTIMATE = 46;

/**
 * The sessions as a virtualised tree: only the rows in and near the view are in
 * the DOM, whatever the count (thousands of sessions). One tab stop: the current
 * session's row (or the first); arrow keys, Home and End move between rows.
 */
function SessionTree(props: { forest: readonly LineageNode[]; currentId?: string; scrollElement: { current: HTMLElement | null } }) {
  const rows = useMemo(() => treeRows(props.forest), [props.forest]);
  const current = rows.findIndex((r) => r.node.session.id === props.currentId);
  const [active, setActive] = useState<number | null>(null);
  const tabStop = Math.min(rows.length - 1, Math.max(0, active ?? (current >= 0 ? current : 0)));
  const focusNext = useRef<number | null>(null);
  const list = useVirtualizer({
    count: rows.length,
    getScrollElement: () => props.scrollElement.current,
    estimateSize: () => ROW_ESTIMATE,
    overscan: 8,
    getItemKey: (i) => rows[i]?.node.session.id ?? i,
  });
  // The current session is in view when the page opens on it.
  useEffect(() => {
    if (current >= 0) list.scrollToIndex(current, { align: 'auto' });
  }, [props.currentId]);
  useLayoutEffect(() => {
    const i = focusNext.current;
    if (i === null) return;
    const link = props.scrollElement.current?.querySelector<HTMLElement>(`[data-index="${i}"] > a`);
    if (link) {
      focusNext.current = null;
      link.focus();
    }
  });
  const move = (to: number) => {
    const i = Math.min(rows.length - 1, Math.max(0, to));
    setActive(i);
    focusNext.current = i;
    list.scrollToIndex(i, { align: 'auto' });
  };
  const onKeyDown = (e: KeyboardEvent) => {
    const keys: Record<string, number> = {
      ArrowDown: tabStop + 1,
      ArrowUp: tabStop - 1,
      Home: 0,
      End: rows.length - 1,
      PageDown: tabStop + 10,
      PageUp: tabStop - 10,
    };
    if (!(e.key in keys)) return;
    e.preventDefault();
    move(keys[e.key]);
  };
  return (
    <ul class="tree-rows" style={{ height: `${list.getTotalSize()}px` }} onKeyDown={onKeyDown} data-count={rows.length}>
      {list.getVirtualItems().map((item) => {
        const { node, depth } = rows[item.index];
        return (
          <TreeRow
            key={item.key}
            node={node}
            depth={depth}
            index={item.index}
            start={item.start}
            currentId={props.currentId}
            tabbable={item.index === tabStop}
            measure={list.measureElement}
            onFocus={() => setActive(item.index)}
          />
        );
      })}
    </ul>
  );
}

/** Time since a moment, in the largest whole unit (the list's "last active"). */
export function ago(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return 'just now';
  const units: Array<[number, string]> = [
    [86_400 * 365, 'y'],
    [86_400 * 30, 'mo'],
    [86_400, 'd'],
    [3600, 'h'],
    [60, 'min'],
  ];
  for (const [size, unit] of units) if (s >= size) return `${Math.floor(s / size)} ${unit} ago`;
  return 'just now';
}

function TreeRow(props: {
  node: LineageNode;
  depth: number;
  index: number;
  start: number;
  currentId?: string;
  tabbable: boolean;
  measure: (el: Element | null) => void;
  onFocus(): void;
}) {
  const { node, depth, currentId } = props;
  const s = node.session;
  const title = visibleText(s.title || 'Untitled');
  // A fork reads as what distinguishes it from its parent; the full title is on hover.
  const label = s.parent ? distinctTitle(title, s.parent.title && visibleText(s.parent.title), s.forkedAtSeq) : title;
  return (
    <li
      class={`tree-node${depth ? ' child' : ''}`}
      data-session-id={s.id}
      data-index={props.index}
      data-depth={depth}
      ref={props.measure}
      style={{ transform: `translateY(${props.start}px)`, paddingLeft: `${depth * 14}px` }}
    >
      <a
        href={sessionPath(s.id)}
        class={`tree-link${s.id === currentId ? ' current' : ''}${node.matched ? '' : ' context'}`}
        aria-current={s.id === currentId ? 'page' : undefined}
        tabIndex={props.tabbable ? 0 : -1}
        onFocus={props.onFocus}
        title={s.parent ? `${title} (fork of ${visibleText(s.parent.title || 'Untitled')} at event ${s.forkedAtSeq})` : title}
      >
        <span class="tree-title">{label}</span>
        <span class="tree-meta">
          {s.forkedAtSeq != null &&
            (s.parent ? (
              <span class="fork-at" title="forked at this event of its parent">
                fork @{s.forkedAtSeq}
              </span>
            ) : (
              <span class="fork-at imported" title="imported from a recording of a fork; its parent is not in this instance">
                imported fork @{s.forkedAtSeq}
              </span>
            ))}
          <StatusBadge status={s.status} failed={s.lastTurnFailed} />
          {s.model && (
            <span class="tree-model" data-testid="session-model" title={`model: ${shownName(s.model.provider)} ${shownName(s.model.model)}`}>
              {shownName(s.model.model)}
            </span>
          )}
          {s.runner && (
            <span class="runner-pool" title={s.runnerHolder ? `external runner pool; held by ${s.runnerHolder}` : 'external runner pool'}>
              {s.runner}
            </span>
          )}
          <span title="events · turns">
            {s.eventCount.toLocaleString('en')} ev · {s.turnCount.toLocaleString('en')} t
          </span>
          <span class="last-active" title={`last active ${new Date(s.updatedAt).toLocaleString()}`}>
            {ago(s.updatedAt)}
          </span>
        </span>
      </a>
    </li>
  );
}

/** A failed import, named by its file, until dismissed (or the next import). */
function ImportErrorBanner(props: { file: string; message: string; onDismiss(): void }) {
  return (
    <div class="banner error" role="alert" data-testid="import-error">
      <span>
        Could not import <strong>{props.file}</strong>: {props.message}
      </span>
      <button type="button" class="small" onClick={props.onDismiss} aria-label={`Dismiss the import error for ${props.file}`}>
        Dismiss
      </button>
    </div>
  );
}

/** Shown when the server asks for an API token (FORKLINE_API_TOKENS). */
