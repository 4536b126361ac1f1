// A session: header with lineage and export, the conversation with the
// composer, and the raw event timeline. Fork and branch open the child.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { DashboardSetSessionTitleDocument, DeleteSessionDocument, type SessionSummaryFragment } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { ConversationPane, type Jump } from './conversation-pane.tsx';
import { BranchDialog, type ChildRequest, type ChildrenMade } from './branch-dialog.tsx';
import { takenUnstartedAt } from '../../../src/core/taken-inputs.ts';
import { withForkSeq } from './fork-points.ts';
import { useForkPoints } from './fork-markers.tsx';
import { eventPath, familyPath, forkPointPath, navigate, sessionPath } from './router.ts';
import { EventsAndFiles } from './files-tab.tsx';
import { Composer } from './composer.tsx';
import { CompareMenu } from './compare.tsx';
import { MenuButton } from './popup-menu.tsx';
import { useSessionFeed } from './session-feed.ts';
import type { SessionDetails } from './session-log.ts';
import { SessionInstructions } from './session-instructions.tsx';
import type { EventPages as SessionPages } from './event-pages.ts';
import { SessionTools } from './session-tools.tsx';
import { SessionInsights } from './session-insights.tsx';
import { SessionSearch } from './session-search.tsx';
import { ExportButton } from './recording-export.tsx';
import { CompactDialog } from './compact-dialog.tsx';
import { VirtualTimeline } from './timeline.tsx';
import { FilterBar, FilteredTimeline, isFiltering, NO_FILTER, useLoadedTypes, type EventFilter } from './timeline-filter.tsx';
import { BadLinkNotice, errorText, StatusBadge } from './widgets.tsx';
import { visibleText } from '../../../src/core/visible-text.ts';

/** `seq`: open at that event (a link to it) instead of the latest ones. */
export function SessionPage({ id, seq, onCreated }: { id: string; seq?: number; onCreated(s: SessionSummaryFragment): void }) {
  const { session, pages, version, live, status, queued, error, resumed } = useSessionFeed(id);
  const [actionError, setActionError] = useState<string | null>(null);
  const [jump, setJump] = useState<Jump | null>(seq === undefined ? null : { seq, nonce: 1 });
  const [filter, setFilter] = useState<EventFilter>(NO_FILTER);
  // Below 900 px the details (counts, lineage, actions, totals, jump and search) fold under "Details".
  const [details, setDetails] = useState(false);
  useEffect(() => setActionError(null), [id, resumed]); // a banner from while the server was away goes when it is back
  // The address follows jumps (#seq-N), so Back and Forward walk them: back at the plain address is the latest.
  useEffect(() => {
    if (seq !== undefined) setJump((j) => (j?.seq === seq ? j : { seq, nonce: (j?.nonce ?? 0) + 1 }));
    else setJump((j) => (j === null || j.seq === -1 ? j : { seq: -1, nonce: j.nonce + 1 }));
  }, [seq]);

  // Fork, branch and edit ask for the child's title, message and model first (BranchDialog), then
  // open the child, or a fan-out's children side by side.
  const [childRequest, setChildRequest] = useState<ChildRequest | null>(null);
  // While children are being made, the fork, branch and edit buttons wait (errors stay in the dialog).
  const busy = childRequest !== null;
  // A cut between an input's removal and its turn's start leaves that input unanswered in the child: the dialog says so.
  const fork = (seq: number) => setChildRequest({ kind: 'fork', seq, takenUnstarted: pages ? takenUnstartedAt((s) => pages.get(s), seq) : [] });
  const branch = (seq: number, turn: number) => setChildRequest({ kind: 'branch', seq, turn });
  const edit = (input: { seq: number; inputId: string; text: string }) => setChildRequest({ kind: 'edit', ...input });
  const made = (m: ChildrenMade) => {
    setChildRequest(null);
    if (m.kind === 'one') {
      onCreated(m.child);
      navigate(sessionPath(m.child.id));
    } else {
      m.children.forEach(onCreated);
      navigate(forkPointPath(id, m.cutSeq));
    }
  };
  const knownChildren = session ? session.children.edges.map((e) => e.node) : [];
  const forkPoints = useForkPoints(id, !session ? null : knownChildren.map((c) => c.id).join(','));

  // A link past the end opens at the latest events, as its notice says (not at a clamped or missing row).
  const knownLength = session && pages ? Math.max(pages.length, session.eventCount) : 0;
  const pastEnd = jump !== null && knownLength > 0 && jump.seq >= knownLength;
  const paneJump = useMemo(() => (pastEnd && jump ? { seq: -1, nonce: jump.nonce } : jump), [jump, pastEnd]);

  if (session === undefined || (session && !pages))
    return (
      <main id="main" tabIndex={-1} class="session-page loading">
        {error ? (
          <p class="error" role="alert">
            {error}
          </p>
        ) : (
          'Loading…'
        )}
      </main>
    );
  if (session === null || !pages)
    return (
      <main id="main" tabIndex={-1} class="session-page">
        <p class="error" role="alert">
          No session {id}: it does not exist or was deleted.
        </p>
      </main>
    );

  // A turn waiting on an approval is still open: Cancel turn ends it (docs/contract.md#tool-approval).
  const running = status === 'RUNNING' || status === 'WAITING' || !!live;
  const jumpTo = (to: number) => {
    setJump((j) => ({ seq: to, nonce: (j?.nonce ?? 0) + 1 }));
    navigate(to < 0 ? sessionPath(id) : eventPath(id, to));
  };
  const length = Math.max(pages.length, session.eventCount);
  return (
    <main id="main" tabIndex={-1} class={`session-page${details ? ' details-open' : ''}`} data-session-id={id}>
      <SessionHeader
        session={session}
        status={status ?? session.status}
        length={pages.length}
        busy={busy}
        onError={setActionError}
        details={details}
        onDetails={setDetails}
      />
      {/* The details drawer: however much of it is open, it scrolls within its share of the window and the
          panes below keep the rest (layout.css: the work area keeps at least 60% of the height). */}
      <div class="session-details" data-testid="session-details">
        <SessionTools sessionId={id} pages={pages} version={version} />
        <SessionInstructions sessionId={id} pages={pages} version={version} />
        {/* The page's width, so the totals stay on one line as they grow (a header growing mid-turn would leave the panes short of their ends). */}
        <SessionInsights
          sessionId={id}
          changed={`${session.turnCount}:${status}`}
          running={running}
          length={pages.length}
          selectedSeq={jump?.seq}
          onJump={jumpTo}
        />
      </div>
      {childRequest && <BranchDialog sessionId={id} request={childRequest} parentTitle={session.title} onMade={made} onClose={() => setChildRequest(null)} />}
      {(error || actionError) && (
        <p class="error" role="alert">
          {actionError ?? error}
        </p>
      )}
      <BadLinkNotice />
      {seq !== undefined && seq >= length && (
        <p class="error" role="alert" data-testid="bad-link">
          This link is to event #{seq}, past the end of this session: its events are #0–#{length - 1}. Showing the latest.
        </p>
      )}
      <div class="find-row">
        <JumpBar length={pages.length} onJump={jumpTo} />
        <SessionSearch sessionId={id} onJump={jumpTo} />
      </div>
      <div class="panes">
        <section class="pane chat" aria-label="Conversation pane">
          <h2>Conversation</h2>
          <ConversationPane
            pages={pages}
            version={version}
            live={live}
            jump={paneJump}
            onBranch={branch}
            onEdit={edit}
            onFork={fork}
            busy={busy}
            sessionId={id}
            forkPoints={forkPoints}
            knownChildren={knownChildren}
          />
          <Composer sessionId={id} running={running} pending={queued} resumed={resumed} />
        </section>
        <section class="pane events" aria-label="Events pane">
          <EventsAndFiles session={{ id, length: pages.length, forkedAtSeq: session.forkedAtSeq, parentId: session.parent?.id }}>
            <h2>
              Events <span class="muted">({pages.length.toLocaleString('en-US')})</span>
            </h2>
            <EventsFilter pages={pages} version={version} filter={filter} onChange={setFilter} />
            {isFiltering(filter) ? (
              <FilteredTimeline pages={pages} version={version} filter={filter} sessionId={id} onFork={fork} busy={busy} />
            ) : (
              <VirtualTimeline pages={pages} version={version} jump={paneJump} onFork={fork} busy={busy} sessionId={id} forkPoints={forkPoints} />
            )}
          </EventsAndFiles>
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
        seq <input type="number" min={0} max={Math.max(0, length - 1)} value={seq} onInput={(e) => setSeq(e.currentTarget.value)} aria-label="Seq to jump to" />
      </label>
      <button type="submit" class="small" disabled={!length || !seq.trim()}>
        Jump to seq
      </button>
    </form>
  );
}

function SessionHeader(props: {
  session: SessionDetails;
  status: string;
  length: number;
  busy: boolean;
  onError(msg: string): void;
  details: boolean;
  onDetails(open: boolean): void;
}) {
  const { session, busy, onError } = props;
  // Compact asks first (compact-dialog.tsx); the summary arrives through the session's feed as a compaction row.
  const [compacting, setCompacting] = useState(false);
  const children = session.children.edges.map((e) => e.node);
  const deleteSession = async () => {
    const name = visibleText(session.title || session.id);
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
        <div class="meta counts">
          <StatusBadge status={props.status} />
          {/* Below 900 px only (layout.css): the status stays, the rest of the header shows on demand. */}
          <button type="button" class="small details-toggle" aria-expanded={props.details} onClick={() => props.onDetails(!props.details)}>
            {props.details ? 'Hide details' : 'Details'}
          </button>
          <span>{Math.max(props.length, session.eventCount).toLocaleString('en-US')} events</span>
          <span>{session.turnCount.toLocaleString('en-US')} turns</span>
          <span
            class="format-version"
            title={`Event format version ${session.formatVersion}: the schema of this session's stored events and of its exported recordings (docs/contract.md §5)`}
          >
            format v{session.formatVersion}
          </span>
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
            Fork of <a href={sessionPath(session.parent.id)}>{visibleText(session.parent.title || session.parent.id)}</a> at event {session.forkedAtSeq} ·{' '}
            {session.inheritedEventCount} inherited · own events from #{session.firstLiveSeq}
          </div>
        )}
        {!session.parent && session.forkedAtSeq != null && (
          <div class="meta lineage" data-testid="imported-lineage">
            Imported fork: the recording was forked at event {session.forkedAtSeq} of a parent that is not in this instance · {session.inheritedEventCount}{' '}
            inherited · own events from #{session.firstLiveSeq}
          </div>
        )}
      </div>
      <div class="head-actions">
        {children.length > 0 && <ChildrenMenu children={children} />}
        <CompareMenu id={session.id} />
        {(session.parent || children.length > 0) && (
          <a class="button" href={familyPath(session.id)} title="This session's fork tree: its root and every fork below it">
            Fork tree
          </a>
        )}
        <button
          type="button"
          onClick={() => setCompacting(true)}
          disabled={busy || session.turnCount === 0}
          aria-haspopup="dialog"
          title="Replace the model-visible history through the last completed turn by a summary (compactSession)"
        >
          Compact…
        </button>
        {compacting && <CompactDialog sessionId={session.id} onClose={() => setCompacting(false)} />}
        <ExportButton sessionId={session.id} fileName={`${slug(session.title) || session.id}.jsonl`} busy={busy} onError={onError} />
        <button type="button" class="danger" onClick={deleteSession} disabled={busy}>
          Delete…
        </button>
      </div>
    </header>
  );
}

/** The session's children as a compact menu (one item each, the full title on hover), not a line each in the header. */
function ChildrenMenu({ children }: { children: SessionDetails['children']['edges'][number]['node'][] }) {
  return (
    <MenuButton label={`Children (${children.length})`} menuLabel="Children" class="children-menu">
      {children.map((c) => {
        const full = withForkSeq(visibleText(c.title || c.id), c.forkedAtSeq);
        return (
          <a key={c.id} role="menuitem" tabIndex={-1} href={sessionPath(c.id)} title={full} data-session-id={c.id}>
            {full}
          </a>
        );
      })}
    </MenuButton>
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
        <h1 title={title ? visibleText(title) : undefined}>{visibleText(title || 'Untitled')}</h1>
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

const slug = (s: string | null | undefined) =>
  (s ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60);
