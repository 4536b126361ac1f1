// The sidebar: every session as a lineage tree, kept live by sessionsChanged,
// with full-text search (search.tsx) and recording import.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  CreateSessionDocument,
  SessionDocument,
  SessionsChangedDocument,
  SessionsChangedSinceDocument,
  SessionsDeletedDocument,
  SessionsDocument,
  type SessionSummaryFragment,
} from '../../generated/graphql.ts';
import { follow, forkline, ForklineClientError, setToken } from './api.ts';
import { NewSessionDialog, type NewSessionChoice } from './dialogs.tsx';
import { focusComposerOf } from './composer.tsx';
import { lineageForest, type LineageNode } from './lineage.ts';
import { navigate, sessionPath } from './router.ts';
import { SearchResults } from './search.tsx';
import { forestOptions, isFiltered, ListViewControls, useListView } from './session-list-view.tsx';
import { errorText, StatusBadge } from './widgets.tsx';

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

/** All sessions by id; loaded page by page, then updated by sessionsChanged and sessionsDeleted. */
export function useSessions() {
  const [sessions, setSessions] = useState<ReadonlyMap<string, SessionSummaryFragment>>(new Map());
  const [error, setError] = useState<string | null>(null);
  const [needsToken, setNeedsToken] = useState(false);
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
    // Subscribe first so nothing that changes during the load is missed.
    const unsubscribe = follow(() => forkline.subscribe(SessionsChangedDocument), {
      next: (r) => {
        setError(null);
        liveDuringLoad?.add(r.sessionsChanged.id);
        upsert([r.sessionsChanged]);
      },
      error: (err) => setError(`live updates: ${errorText(err)}`),
      reconnecting: () => setError('live updates: reconnecting…'),
      // Back after a lost connection (a server restart): the subscription does not replay what changed
      // meanwhile, so the list asks for the sessions changed since what it held (made, forked, appended to).
      resumed: () => {
        setError(null);
        catchUp().catch((err) => !cancelled && setError(errorText(err)));
      },
    });
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
    };
    // What changed since the newest change held; a deletion while away is seen by the count
    // (sessionsDeleted does not replay either): then, and only then, the whole list is read again.
    const catchUp = async () => {
      const newest = newestChange(held.current.values());
      if (newest === null) return load(true);
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
    load(false).catch((err) => {
      if (cancelled) return;
      setError(errorText(err));
      setNeedsToken(err instanceof ForklineClientError && err.code === 'UNAUTHENTICATED');
    });
    return () => {
      cancelled = true;
      unsubscribe();
      unsubscribeDeleted();
    };
  }, []);

  return { sessions, error, needsToken, add: (s: SessionSummaryFragment) => setSessions((prev) => new Map(prev).set(s.id, s)) };
}

export function Sidebar(props: {
  sessions: ReadonlyMap<string, SessionSummaryFragment>;
  error: string | null;
  needsToken: boolean;
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
      {props.needsToken && <TokenForm />}
      {query ? (
        <SearchResults query={query} currentId={props.currentId} />
      ) : (
        <nav class="tree" aria-label="Sessions">
          {forest.length ? (
            <ul>
              {forest.map((node) => (
                <TreeNode key={node.session.id} node={node} currentId={props.currentId} />
              ))}
            </ul>
          ) : isFiltered(view) && props.sessions.size ? (
            <p class="muted">No session matches the filter.</p>
          ) : (
            <p class="muted">No sessions yet: start a new session or import a recording.</p>
          )}
        </nav>
      )}
    </aside>
  );
}

function TreeNode({ node, currentId }: { node: LineageNode; currentId?: string }) {
  const s = node.session;
  return (
    <li class="tree-node" data-session-id={s.id}>
      <a
        href={sessionPath(s.id)}
        class={`tree-link${s.id === currentId ? ' current' : ''}${node.matched ? '' : ' context'}`}
        aria-current={s.id === currentId ? 'page' : undefined}
      >
        <span class="tree-title">{s.title || 'Untitled'}</span>
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
          <StatusBadge status={s.status} />
          {s.runner && (
            <span class="runner-pool" title={s.runnerHolder ? `external runner pool; held by ${s.runnerHolder}` : 'external runner pool'}>
              {s.runner}
            </span>
          )}
          <span title="events · turns">
            {s.eventCount} ev · {s.turnCount} t
          </span>
        </span>
      </a>
      {node.children.length > 0 && (
        <ul>
          {node.children.map((child) => (
            <TreeNode key={child.session.id} node={child} currentId={currentId} />
          ))}
        </ul>
      )}
    </li>
  );
}

/**
 * A real button that opens a hidden file input, so Tab reaches it and Enter or
 * Space opens the picker (a label around a hidden input is not focusable).
 */
function ImportButton(props: { onImported(s: SessionSummaryFragment): void; onError(e: { file: string; message: string } | null): void }) {
  const input = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const onChange = async () => {
    const file = input.current?.files?.[0];
    if (!file) return;
    setBusy(true);
    props.onError(null);
    try {
      // Streamed to POST /recordings: a file picker may hand us a large recording.
      const { id } = await forkline.uploadRecording(file);
      const { session } = await forkline.query(SessionDocument, { id });
      if (session) props.onImported(session);
      navigate(sessionPath(id));
    } catch (err) {
      props.onError({ file: file.name, message: errorText(err) });
    } finally {
      setBusy(false);
      if (input.current) input.current.value = '';
    }
  };
  return (
    <>
      <button type="button" class={busy ? 'busy' : ''} disabled={busy} onClick={() => input.current?.click()}>
        {busy ? 'Importing…' : 'Import recording'}
      </button>
      <input ref={input} type="file" accept=".jsonl,.json,.txt,application/x-ndjson" onChange={onChange} data-testid="import-file" hidden />
    </>
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
function TokenForm() {
  const [value, setValue] = useState('');
  return (
    <form
      class="token-form"
      onSubmit={(e) => {
        e.preventDefault();
        setToken(value.trim());
      }}
    >
      <input type="password" placeholder="API token" aria-label="API token" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
      <button type="submit">Use token</button>
    </form>
  );
}
