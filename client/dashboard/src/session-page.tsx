// A session: header with lineage and export, the conversation with the
// composer, and the raw event timeline. Fork and branch open the child.
import { Fragment, type ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  BranchSessionDocument,
  CompactSessionDocument,
  DashboardCancelTurnDocument,
  DashboardSetSessionTitleDocument,
  DeleteSessionDocument,
  ForkSessionDocument,
  SendMessageDocument,
  type SessionSummaryFragment,
} from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { ConversationPane, type Jump } from './conversation-pane.tsx';
import { ChildDialog, type ChildRequest } from './dialogs.tsx';
import { navigate, sessionPath } from './router.ts';
import { CompareMenu } from './compare.tsx';
import { useSessionFeed } from './session-feed.ts';
import type { SessionDetails } from './session-log.ts';
import type { EventPages as SessionPages } from './event-pages.ts';
import { SessionTools } from './session-tools.tsx';
import { SessionSearch } from './session-search.tsx';
import { ExportButton } from './recording-export.tsx';
import { VirtualTimeline } from './timeline.tsx';
import { FilterBar, FilteredTimeline, isFiltering, NO_FILTER, useLoadedTypes, type EventFilter } from './timeline-filter.tsx';
import { errorText, StatusBadge } from './widgets.tsx';

/** `seq`: open at that event (a link to it) instead of the latest ones. */
export function SessionPage({ id, seq, onCreated }: { id: string; seq?: number; onCreated(s: SessionSummaryFragment): void }) {
  const { session, pages, version, live, status, queued, error } = useSessionFeed(id);
  const [actionError, setActionError] = useState<string | null>(null);
  const [jump, setJump] = useState<Jump | null>(seq === undefined ? null : { seq, nonce: 1 });
  const [filter, setFilter] = useState<EventFilter>(NO_FILTER);
  useEffect(() => setActionError(null), [id]);
  useEffect(() => {
    if (seq !== undefined) setJump((j) => (j?.seq === seq ? j : { seq, nonce: (j?.nonce ?? 0) + 1 }));
  }, [seq]);

  const openChild = (child: SessionSummaryFragment) => {
    onCreated(child);
    navigate(sessionPath(child.id));
  };
  // Fork and branch ask for the child's title first (ChildDialog), then make it and open it.
  const [childRequest, setChildRequest] = useState<ChildRequest | null>(null);
  // While a child is being named and made, the fork and branch buttons wait (its errors stay in the dialog).
  const busy = childRequest !== null;
  const fork = (seq: number) => setChildRequest({ kind: 'fork', seq });
  const branch = (seq: number, turn: number) => setChildRequest({ kind: 'branch', seq, turn });
  const makeChild = async (request: ChildRequest, title: string) => {
    const input = { sessionId: id, title: title || null };
    const child =
      request.kind === 'fork'
        ? (await forkline.mutate(ForkSessionDocument, { input: { ...input, atSeq: request.seq } })).forkSession.session
        : (await forkline.mutate(BranchSessionDocument, { input: { ...input, anchorSeq: request.seq } })).branchSession.session;
    openChild(child);
  };

  if (session === undefined || (session && !pages)) return <main class="session-page loading">Loading…</main>;
  if (session === null || !pages)
    return (
      <main class="session-page">
        <p class="error">No session {id}: it does not exist or was deleted.</p>
      </main>
    );

  const running = status === 'RUNNING' || !!live;
  const jumpTo = (seq: number) => setJump((j) => ({ seq, nonce: (j?.nonce ?? 0) + 1 }));
  return (
    <main class="session-page" data-session-id={id}>
      <SessionHeader session={session} status={status ?? session.status} length={pages.length} busy={busy} onError={setActionError}>
        <SessionTools sessionId={id} pages={pages} version={version} />
      </SessionHeader>
      {childRequest && (
        <ChildDialog
          request={childRequest}
          parentTitle={session.title}
          onCreate={(title) => makeChild(childRequest, title)}
          onClose={() => setChildRequest(null)}
        />
      )}
      {(error || actionError) && (
        <p class="error" role="alert">
          {actionError ?? error}
        </p>
      )}
      <JumpBar length={pages.length} onJump={jumpTo} />
      <SessionSearch sessionId={id} onJump={jumpTo} />
      <div class="panes">
        <section class="pane chat" aria-label="Conversation pane">
          <h2>Conversation</h2>
          <ConversationPane pages={pages} version={version} live={live} jump={jump} onBranch={branch} busy={busy} sessionId={id} />
          <Composer sessionId={id} running={running} pending={queued} />
        </section>
        <section class="pane events" aria-label="Events pane">
          <h2>
            Events <span class="muted">({pages.length})</span>
          </h2>
          <EventsFilter pages={pages} version={version} filter={filter} onChange={setFilter} />
          {isFiltering(filter) ? (
            <FilteredTimeline pages={pages} version={version} filter={filter} sessionId={id} onFork={fork} busy={busy} />
          ) : (
            <VirtualTimeline pages={pages} version={version} jump={jump} onFork={fork} busy={busy} sessionId={id} />
          )}
        </section>
      </div>
    </main>
  );
}

function EventsFilter(props: { pages: SessionPages; version: number; filter: EventFilter; onChange(f: EventFilter): void }) {
  const types = useLoadedTypes(props.pages, props.version);
  return <FilterBar filter={props.filter} types={types} onChange={props.onChange} />;
}

/** Jump to the log's start, its latest events, or a seq (both panes follow). */
function JumpBar({ length, onJump }: { length: number; onJump(seq: number): void }) {
  const [seq, setSeq] = useState('');
  return (
    <form
      class="jump-bar"
      aria-label="Jump"
      onSubmit={(e) => {
        e.preventDefault();
        const n = Number(seq);
        if (seq.trim() && Number.isInteger(n) && n >= 0) onJump(Math.min(n, length - 1));
      }}
    >
      <button type="button" class="small" onClick={() => onJump(0)} disabled={!length}>
        Jump to start
      </button>
      <button type="button" class="small" onClick={() => onJump(-1)} disabled={!length}>
        Jump to latest
      </button>
      <label>
        seq{' '}
        <input type="number" min={0} max={Math.max(0, length - 1)} value={seq} onInput={(e) => setSeq(e.currentTarget.value)} aria-label="Seq to jump to" />
      </label>
      <button type="submit" class="small" disabled={!length || !seq.trim()}>
        Jump to seq
      </button>
    </form>
  );
}

function SessionHeader(props: { session: SessionDetails; status: string; length: number; busy: boolean; onError(msg: string): void; children?: ComponentChildren }) {
  const { session, busy, onError } = props;
  const [compacting, setCompacting] = useState(false);
  // Summarises the history through the last completed turn (compactSession); the
  // summary arrives through the session's feed as a compaction row.
  const compact = async () => {
    setCompacting(true);
    try {
      await forkline.mutate(CompactSessionDocument, { input: { sessionId: session.id } });
    } catch (err) {
      onError(errorText(err));
    } finally {
      setCompacting(false);
    }
  };
  const children = session.children.edges.map((e) => e.node);
  const deleteSession = async () => {
    const name = session.title || session.id;
    const question = children.length
      ? `Delete "${name}" and every fork below it (${children.length} direct)? Their events go too.`
      : `Delete "${name}" and its events?`;
    if (!confirm(question)) return;
    try {
      await forkline.mutate(DeleteSessionDocument, { id: session.id, withDescendants: children.length > 0 });
      navigate(session.parent ? sessionPath(session.parent.id) : '/');
    } catch (err) {
      onError(errorText(err));
    }
  };
  return (
    <header class="session-head">
      <div class="session-title">
        <SessionTitle id={session.id} title={session.title} onError={onError} />
        <div class="meta">
          <StatusBadge status={props.status} />
          <span>{Math.max(props.length, session.eventCount)} events</span>
          <span>{session.turnCount} turns</span>
          <span>V{session.formatVersion}</span>
          {session.runner && (
            <span class="runner-pool" title="run by an external runner pool (docs/runners.md)">
              runner pool {session.runner}
              {session.runnerHolder ? ` · held by ${session.runnerHolder}` : ''}
            </span>
          )}
          <code class="muted">{session.id}</code>
        </div>
        {session.parent && (
          <div class="meta lineage">
            Fork of{' '}
            <a href={sessionPath(session.parent.id)}>
              {session.parent.title || session.parent.id}
            </a>{' '}
            at event {session.forkedAtSeq} · {session.inheritedEventCount} inherited · own events from #{session.firstLiveSeq}
          </div>
        )}
        {!session.parent && session.forkedAtSeq != null && (
          <div class="meta lineage" data-testid="imported-lineage">
            Imported fork: the recording was forked at event {session.forkedAtSeq} of a parent that is not in this instance ·{' '}
            {session.inheritedEventCount} inherited · own events from #{session.firstLiveSeq}
          </div>
        )}
        {children.length > 0 && (
          <div class="meta lineage">
            children:{' '}
            {children.map((c, i) => (
              <Fragment key={c.id}>
                {i > 0 && ', '}
                <a href={sessionPath(c.id)}>
                  {c.title || c.id} @{c.forkedAtSeq}
                </a>
              </Fragment>
            ))}
          </div>
        )}
        {props.children}
      </div>
      <div class="head-actions">
        <CompareMenu id={session.id} />
        <button type="button" onClick={compact} disabled={busy || compacting || session.turnCount === 0} title="Replace the model-visible history through the last completed turn by a summary (compactSession)">
          {compacting ? 'Compacting…' : 'Compact'}
        </button>
        <ExportButton sessionId={session.id} fileName={`${slug(session.title) || session.id}.jsonl`} busy={busy} onError={onError} />
        <button type="button" class="danger" onClick={deleteSession} disabled={busy}>
          Delete…
        </button>
      </div>
    </header>
  );
}

/** The title, renamed in place (setSessionTitle); the new title arrives through the session's feed. */
function SessionTitle({ id, title, onError }: { id: string; title: string | null | undefined; onError(msg: string): void }) {
  const [draft, setDraft] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const save = async () => {
    if (draft === null) return;
    setSaving(true);
    try {
      await forkline.mutate(DashboardSetSessionTitleDocument, { sessionId: id, title: draft.trim() });
      setDraft(null);
    } catch (err) {
      onError(errorText(err));
    } finally {
      setSaving(false);
    }
  };
  if (draft === null)
    return (
      <div class="title-row">
        <h1>{title || 'Untitled'}</h1>
        <button type="button" class="small" onClick={() => setDraft(title ?? '')} aria-label="Rename session">
          Rename
        </button>
      </div>
    );
  return (
    <form
      class="title-row rename"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <input
        aria-label="Session title"
        value={draft}
        maxLength={200}
        autoFocus
        onInput={(e) => setDraft(e.currentTarget.value)}
        onKeyDown={(e) => e.key === 'Escape' && setDraft(null)}
      />
      <button type="submit" class="small primary" disabled={saving}>
        Save
      </button>
      <button type="button" class="small" onClick={() => setDraft(null)}>
        Cancel
      </button>
    </form>
  );
}

function Composer({ sessionId, running, pending }: { sessionId: string; running: boolean; pending: number }) {
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const send = async () => {
    if (!text.trim() || sending) return;
    setSending(true);
    setError(null);
    try {
      await forkline.mutate(SendMessageDocument, { input: { sessionId, text } });
      setText('');
    } catch (err) {
      setError(errorText(err));
    } finally {
      setSending(false);
    }
  };
  const cancel = async () => {
    try {
      await forkline.mutate(DashboardCancelTurnDocument, { sessionId });
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <textarea
        aria-label="Message"
        placeholder="Message (Ctrl+Enter to send). Scripted model cues: !call clock {} · !then · !slow 80 · !fail why"
        rows={3}
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            void send();
          }
        }}
      />
      <div class="composer-bar">
        <span class="muted">
          {running ? 'A turn is running.' : 'Idle.'} {pending > 0 && `${pending} queued.`}
        </span>
        {error && <span class="error">{error}</span>}
        <button type="button" onClick={cancel} disabled={!running}>
          Cancel turn
        </button>
        <button type="submit" class="primary" disabled={sending || !text.trim()}>
          Send
        </button>
      </div>
    </form>
  );
}

const slug = (s: string | null | undefined) =>
  (s ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60);
