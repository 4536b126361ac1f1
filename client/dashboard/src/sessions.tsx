// The sidebar: every session as a lineage tree, kept live by sessionsChanged,
// with full-text search (search.tsx) and recording import.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  SessionDocument,
  SessionsChangedDocument,
  SessionsDeletedDocument,
  SessionsDocument,
  type SessionSummaryFragment,
} from '../../generated/graphql.ts';
import { follow, forkline, ForklineClientError, setToken } from './api.ts';
import { lineageForest, type LineageNode } from './lineage.ts';
import { navigate, onLinkClick, sessionPath } from './router.ts';
import { SearchResults } from './search.tsx';
import { errorText, StatusBadge } from './widgets.tsx';

const PAGE = 500;

/** All sessions by id; loaded page by page, then updated by sessionsChanged and sessionsDeleted. */
export function useSessions() {
  const [sessions, setSessions] = useState<ReadonlyMap<string, SessionSummaryFragment>>(new Map());
  const [error, setError] = useState<string | null>(null);
  const [needsToken, setNeedsToken] = useState(false);

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
    // Subscribe first so nothing that changes during the load is missed.
    const unsubscribe = follow(() => forkline.subscribe(SessionsChangedDocument), {
      next: (r) => {
        setError(null);
        upsert([r.sessionsChanged]);
      },
      error: (err) => setError(`live updates: ${errorText(err)}`),
      reconnecting: () => setError('live updates: reconnecting…'),
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
    (async () => {
      let after: string | null | undefined;
      do {
        const r = await forkline.query(SessionsDocument, { first: PAGE, after });
        if (cancelled) return;
        upsert(r.sessions.edges.map((e) => e.node));
        after = r.sessions.pageInfo.hasNextPage ? r.sessions.pageInfo.endCursor : null;
      } while (after);
    })().catch((err) => {
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
  const query = search.trim();
  const forest = useMemo(() => lineageForest(props.sessions.values()), [props.sessions]);
  return (
    <aside class="sidebar">
      <header class="sidebar-head">
        <a href="/" class="brand" onClick={onLinkClick}>
          forkline
        </a>
        <ImportButton onImported={props.onImported} />
      </header>
      <input
        class="search"
        type="search"
        placeholder="Search sessions…"
        aria-label="Search titles, inputs and answers"
        value={search}
        onInput={(e) => setSearch(e.currentTarget.value)}
      />
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
          ) : (
            <p class="muted">No sessions yet: import a recording.</p>
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
        onClick={onLinkClick}
        class={`tree-link${s.id === currentId ? ' current' : ''}${node.matched ? '' : ' context'}`}
        aria-current={s.id === currentId ? 'page' : undefined}
      >
        <span class="tree-title">{s.title || 'Untitled'}</span>
        <span class="tree-meta">
          {s.forkedAtSeq != null && <span class="fork-at" title="forked at this event of its parent">fork @{s.forkedAtSeq}</span>}
          <StatusBadge status={s.status} />
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

function ImportButton({ onImported }: { onImported(s: SessionSummaryFragment): void }) {
  const input = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const onChange = async () => {
    const file = input.current?.files?.[0];
    if (!file) return;
    setBusy(true);
    setError(null);
    try {
      // Streamed to POST /recordings: a file picker may hand us a large recording.
      const { id } = await forkline.uploadRecording(file);
      const { session } = await forkline.query(SessionDocument, { id });
      if (session) onImported(session);
      navigate(sessionPath(id));
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
      if (input.current) input.current.value = '';
    }
  };
  return (
    <div class="import">
      <label class={`button${busy ? ' busy' : ''}`}>
        {busy ? 'Importing…' : 'Import recording'}
        <input ref={input} type="file" accept=".jsonl,.json,.txt,application/x-ndjson" onChange={onChange} data-testid="import-file" hidden />
      </label>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
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
