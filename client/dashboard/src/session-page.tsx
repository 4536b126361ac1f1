// A session: header with lineage and export, the conversation with the
// composer, and the raw event timeline. Fork and branch open the child.
import { Fragment, type ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  BranchSessionDocument,
  DashboardCancelTurnDocument,
  DeleteSessionDocument,
  ForkSessionDocument,
  SendMessageDocument,
  SessionRecordingDocument,
  type SessionSummaryFragment,
} from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { foldConversation } from './conversation.ts';
import { ConversationView } from './conversation-view.tsx';
import { comparePath, navigate, onLinkClick, sessionPath } from './router.ts';
import { useSessionLog, type SessionDetails } from './session-log.ts';
import { Timeline } from './timeline.tsx';
import { errorText, StatusBadge } from './widgets.tsx';

export function SessionPage({ id, seq, onCreated }: { id: string; /** An event to show (a search hit). */ seq?: number; onCreated(s: SessionSummaryFragment): void }) {
  const { session, events, live, error } = useSessionLog(id);
  const items = useMemo(() => foldConversation(events), [events]);
  const [busy, setBusy] = useState(false);
  const [actionError, setActionError] = useState<string | null>(null);
  useEffect(() => setActionError(null), [id]);

  const run = async (action: () => Promise<void>) => {
    setBusy(true);
    setActionError(null);
    try {
      await action();
    } catch (err) {
      setActionError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const openChild = (child: SessionSummaryFragment) => {
    onCreated(child);
    navigate(sessionPath(child.id));
  };
  const fork = (atSeq: number) =>
    run(async () => openChild((await forkline.mutate(ForkSessionDocument, { input: { sessionId: id, atSeq } })).forkSession.session));
  const branch = (anchorSeq: number) =>
    run(async () =>
      openChild((await forkline.mutate(BranchSessionDocument, { input: { sessionId: id, anchorSeq } })).branchSession.session),
    );

  if (session === undefined) return <main class="session-page loading">Loading…</main>;
  if (session === null)
    return (
      <main class="session-page">
        <p class="error">No session {id}: it does not exist or was deleted.</p>
      </main>
    );

  const running = session.status === 'RUNNING' || !!live;
  return (
    <main class="session-page" data-session-id={id}>
      <SessionHeader session={session} busy={busy} onError={setActionError} />
      {(error || actionError) && (
        <p class="error" role="alert">
          {actionError ?? error}
        </p>
      )}
      <div class="panes">
        <section class="pane chat" aria-label="Conversation pane">
          <h2>Conversation</h2>
          <AutoScroll class="scroll" dep={[items, live]}>
            {items.length ? (
              <ConversationView items={items} live={live} onBranch={branch} busy={busy} parentTitle={session.parent?.title} />
            ) : (
              <p class="muted">Nothing yet: send a message.</p>
            )}
          </AutoScroll>
          <Composer sessionId={id} running={running} pending={session.pendingInputs.length} />
        </section>
        <section class="pane events" aria-label="Events pane">
          <h2>
            Events <span class="muted">({events.length})</span>
          </h2>
          <div class="scroll">
            <Timeline events={events} onFork={fork} busy={busy} targetSeq={seq} />
          </div>
        </section>
      </div>
    </main>
  );
}

function SessionHeader({ session, busy, onError }: { session: SessionDetails; busy: boolean; onError(msg: string): void }) {
  const exportRecording = async () => {
    try {
      const r = await forkline.query(SessionRecordingDocument, { id: session.id });
      if (!r.session) throw new Error('session not found');
      const url = URL.createObjectURL(new Blob([r.session.recording], { type: 'application/x-ndjson' }));
      const a = Object.assign(document.createElement('a'), { href: url, download: `${slug(session.title) || session.id}.jsonl` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (err) {
      onError(errorText(err));
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
        <h1>{session.title || 'Untitled'}</h1>
        <div class="meta">
          <StatusBadge status={session.status} />
          <span>{session.eventCount} events</span>
          <span>{session.turnCount} turns</span>
          <span>V{session.formatVersion}</span>
          <code class="muted">{session.id}</code>
        </div>
        {session.parent && (
          <div class="meta lineage">
            Fork of{' '}
            <a href={sessionPath(session.parent.id)} onClick={onLinkClick}>
              {session.parent.title || session.parent.id}
            </a>{' '}
            at event {session.forkedAtSeq} · {session.inheritedEventCount} inherited · own events from #{session.firstLiveSeq}
          </div>
        )}
        {children.length > 0 && (
          <div class="meta lineage">
            children:{' '}
            {children.map((c, i) => (
              <Fragment key={c.id}>
                {i > 0 && ', '}
                <a href={sessionPath(c.id)} onClick={onLinkClick}>
                  {c.title || c.id} @{c.forkedAtSeq}
                </a>
              </Fragment>
            ))}
          </div>
        )}
      </div>
      <div class="head-actions">
        {session.parent && (
          <a class="button" href={comparePath(session.id)} onClick={onLinkClick}>
            Compare with parent
          </a>
        )}
        <button type="button" onClick={exportRecording} disabled={busy}>
          Export recording
        </button>
        <button type="button" class="danger" onClick={deleteSession} disabled={busy}>
          Delete…
        </button>
      </div>
    </header>
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

/** A scroll box that follows new content while the reader is at its bottom. */
function AutoScroll(props: { class: string; dep: unknown[]; children: ComponentChildren }) {
  const box = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  useLayoutEffect(() => {
    if (box.current && atBottom.current) box.current.scrollTop = box.current.scrollHeight;
  }, props.dep);
  return (
    <div
      ref={box}
      class={props.class}
      onScroll={(e) => {
        const el = e.currentTarget;
        atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
      }}
    >
      {props.children}
    </div>
  );
}

const slug = (s: string | null | undefined) =>
  (s ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60);
