// Two sessions of one tree side by side from their common ancestor (parent and
// child, siblings, cousins): row i is seq i on both sides, the seqs both share
// (0..commonPrefix, one stored event, read once from the left log) dimmed, the
// first divergent seq highlighted, and the view opens there. Nothing loads a
// whole log: each side is an EventPages (the session page's pages, fetched on
// demand through the events connection) and only the rows near the viewport
// exist (the virtualizer), so a 5,000-event pair fetches a window or two. Both
// sides follow their live appends: a session still running grows in place.
import { useEffect, useLayoutEffect, useMemo, useReducer, useRef, useState } from 'preact/hooks';
import { useDismiss } from './popup-menu.tsx';
import {
  DashboardCompareCandidatesDocument,
  DashboardCompareDocument,
  DashboardSessionDocument,
  type SessionSummaryFragment,
} from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { eventSummary, type LogEvent } from './conversation.ts';
import { diffRow, openingSeq, rightRange, type DiffRow } from './diff-rows.ts';
import type { EventPages } from './event-pages.ts';
import { followAppends, sessionEventPages } from './session-feed.ts';
import { diffPath, eventPath, navigate, redirect, sessionPath } from './router.ts';
import { useVirtualizer } from './use-virtualizer.ts';
import { withForkSeq } from './fork-points.ts';
import { TurnDiff } from './compare-turns.tsx';
import { Badge, errorText } from './widgets.tsx';
import { visibleText } from '../../../src/core/visible-text.ts';

type Side = SessionSummaryFragment;

interface Loaded {
  left: Side;
  right: Side;
  /** Last seq both share (-1: none). */
  prefix: number;
  leftPages: EventPages;
  rightPages: EventPages;
}

/** The old `/sessions/<id>/compare` address: the diff of its parent (left) and it (right). */
export function CompareRedirect({ id }: { id: string }) {
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    forkline
      .query(DashboardSessionDocument, { id, withInputs: false })
      .then((r) => {
        const parent = r.session?.parent?.id;
        if (parent) redirect(diffPath(parent, id));
        else setError(r.session ? `Session ${id} has no parent to compare with.` : `No session ${id}.`);
      })
      .catch((err) => setError(errorText(err)));
  }, [id]);
  return (
    <main id="main" tabIndex={-1} class="compare-page">
      {error ? <p class="error">{error}</p> : <p class="muted">Loading…</p>}
    </main>
  );
}

export function DiffPage({ a, b }: { a: string; b: string }) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let closed = false;
    forkline
      .query(DashboardCompareDocument, { a, b })
      .then((r) => {
        if (closed) return;
        if (!r.a || !r.b) return setError(`No session ${!r.a ? a : b}: it does not exist or was deleted.`);
        setLoaded({
          left: r.a,
          right: r.b,
          prefix: r.a.commonPrefix,
          leftPages: sessionEventPages(a, r.a.eventCount),
          rightPages: sessionEventPages(b, r.b.eventCount),
        });
      })
      .catch((err) => !closed && setError(errorText(err)));
    return () => {
      closed = true;
    };
  }, [a, b]);
  if (error)
    return (
      <main id="main" tabIndex={-1} class="compare-page">
        <p class="error" role="alert">
          {error}
        </p>
      </main>
    );
  if (!loaded)
    return (
      <main id="main" tabIndex={-1} class="compare-page loading">
        Loading…
      </main>
    );
  return <DiffLoaded {...loaded} />;
}

function DiffLoaded({ left, right, prefix, leftPages, rightPages }: Loaded) {
  const [jump, setJump] = useState(0);
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  useEffect(() => {
    const stops = [leftPages.subscribe(() => rerender(0)), rightPages.subscribe(() => rerender(0))];
    stops.push(followAppends(left.id, leftPages), followAppends(right.id, rightPages));
    return () => stops.forEach((s) => s());
  }, [left.id, right.id, leftPages, rightPages]);
  const rows = Math.max(leftPages.length, rightPages.length);
  const first = prefix + 1;
  // By turns (the conversations aligned turn by turn: what a reader compares) unless the address says
  // `?by=seq` (row i is seq i, the raw events); the choice is kept in the address.
  const [byTurns, setByTurns] = useState(() => new URLSearchParams(location.search).get('by') !== 'seq');
  const showByTurns = (on: boolean) => {
    setByTurns(on);
    const url = new URL(location.href);
    if (on) url.searchParams.delete('by');
    else url.searchParams.set('by', 'seq');
    history.replaceState(history.state, '', url);
  };
  const related = prefix >= 0;
  return (
    <main id="main" tabIndex={-1} class="compare-page" data-left={left.id} data-right={right.id} data-common-prefix={prefix}>
      <header class="session-head">
        <div class="session-title">
          <h1>Compare sessions</h1>
          <div class="meta" data-testid="diff-summary">
            {related ? (
              <span>
                Events 0–{prefix} are shared (the common ancestor's) · <strong>first divergence at #{first}</strong>
              </span>
            ) : (
              <span>These sessions share no events (not of one tree, or forked before event 0): compared from #0.</span>
            )}
          </div>
        </div>
        <div class="head-actions">
          <div class="view-switch" role="group" aria-label="Compare">
            <button type="button" aria-pressed={byTurns} onClick={() => showByTurns(true)}>
              By turns
            </button>
            <button type="button" aria-pressed={!byTurns} onClick={() => showByTurns(false)}>
              By seq
            </button>
          </div>
          {!byTurns && (
            <button type="button" onClick={() => setJump((n) => n + 1)}>
              Jump to divergence
            </button>
          )}
          <a class="button" href={`${diffPath(right.id, left.id)}${byTurns ? '' : '?by=seq'}`}>
            Swap sides
          </a>
        </div>
      </header>
      <section class="pane diff" aria-label={byTurns ? 'Compared turns' : 'Compared events'}>
        <div class="diff-heads" role="presentation">
          <SideHead side={left} label="Left" length={leftPages.length} />
          <SideHead side={right} label="Right" length={rightPages.length} />
        </div>
        {byTurns ? (
          <TurnDiff
            left={left}
            right={right}
            prefix={prefix}
            leftPages={leftPages}
            rightPages={rightPages}
            version={`${leftPages.version}:${rightPages.version}`}
          />
        ) : (
          <DiffTable left={left} right={right} prefix={prefix} rows={rows} leftPages={leftPages} rightPages={rightPages} jump={jump} />
        )}
      </section>
    </main>
  );
}

function SideHead({ side, label, length }: { side: Side; label: string; length: number }) {
  return (
    <h2 data-testid={`diff-head-${label.toLowerCase()}`}>
      {label}: <a href={sessionPath(side.id)}>{visibleText(side.title || side.id)}</a>{' '}
      <span class="muted">
        {length.toLocaleString('en-US')} events{side.forkedAtSeq != null && side.forkedAtSeq >= 0 ? ` · forked @${side.forkedAtSeq}` : ''}
      </span>
    </h2>
  );
}

const ROW_HEIGHT = 28;

function DiffTable(props: { left: Side; right: Side; prefix: number; rows: number; leftPages: EventPages; rightPages: EventPages; jump: number }) {
  const { prefix, rows, leftPages, rightPages } = props;
  const box = useRef<HTMLDivElement>(null);
  const open = openingSeq(prefix, rows);
  const v = useVirtualizer({
    count: rows,
    getScrollElement: () => box.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 20,
    // Opens at the divergence: the first range rendered (and fetched) is already there.
    initialOffset: () => Math.max(0, open * ROW_HEIGHT - (box.current?.clientHeight ?? 600) / 2),
  });
  const items = v.getVirtualItems();
  const firstRow = items[0]?.index ?? 0;
  const lastRow = items.at(-1)?.index ?? -1;
  useEffect(() => {
    if (lastRow < 0) return;
    void leftPages.ensure(firstRow, lastRow).catch(() => {}); // retried on the next scroll
    const r = rightRange(firstRow, lastRow, prefix);
    if (r) void rightPages.ensure(r[0], r[1]).catch(() => {});
  }, [firstRow, lastRow, leftPages, rightPages, prefix]);
  useLayoutEffect(() => {
    if (rows) v.scrollToIndex(open, { align: 'center' });
  }, [props.jump]);

  return (
    <div ref={box} class="scroll diff-scroll" data-testid="diff-scroll" role="table" aria-label="Events of both sessions by seq" aria-rowcount={rows}>
      <div style={{ height: `${v.getTotalSize()}px`, position: 'relative' }}>
        {items.map((item) => (
          <DiffLine key={item.index} row={diffRow(item.index, prefix, leftPages, rightPages)} left={props.left.id} right={props.right.id} top={item.start} />
        ))}
      </div>
    </div>
  );
}

function DiffLine({ row, left, right, top }: { row: DiffRow; left: string; right: string; top: number }) {
  const first = row.kind === 'first-divergent';
  return (
    <div
      role="row"
      aria-rowindex={row.seq + 1}
      class={`diff-row ${row.kind}`}
      data-seq={row.seq}
      aria-current={first ? 'location' : undefined}
      style={{ transform: `translateY(${top}px)`, height: `${ROW_HEIGHT}px` }}
    >
      <DiffCell event={row.left} seq={row.seq} sessionId={left} testId="diff-left" shared={row.kind === 'shared'} first={first} />
      <DiffCell event={row.right} seq={row.seq} sessionId={right} testId="diff-right" shared={row.kind === 'shared'} first={first} />
    </div>
  );
}

function DiffCell(props: { event: LogEvent | null | undefined; seq: number; sessionId: string; testId: string; shared: boolean; first: boolean }) {
  const e = props.event;
  return (
    <div role="cell" class="diff-cell" data-testid={props.testId}>
      <span class="seq">{props.seq}</span>
      {e === null ? (
        <span class="muted">— past the end of this log</span>
      ) : e === undefined ? (
        <span class="muted">…</span>
      ) : (
        <>
          <a class="type" href={eventPath(props.sessionId, e.seq)} title={`Open event ${e.seq} in its session`}>
            {e.type}
          </a>
          {props.first && <Badge tone="first-divergence">first divergence</Badge>}
          {props.shared ? (
            <Badge tone="inherited" title="The same stored event in both sessions">
              shared
            </Badge>
          ) : (
            e.inherited && (
              <Badge tone="inherited" title="Inherited by this session's fork from an ancestor (not shared with the other side)">
                inherited
              </Badge>
            )
          )}
          {e.synthetic && <Badge tone="synthetic">synthetic</Badge>}
          <span class="summary">{eventSummary(e)}</span>
        </>
      )}
    </div>
  );
}

/** "Compare with…" on a session page: its parent, siblings and children, or any session id of the tree. */
export function CompareMenu({ id }: { id: string }) {
  const [open, setOpen] = useState(false);
  const [data, setData] = useState<{ parent: Peer | null; siblings: Peer[]; children: Peer[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [other, setOther] = useState('');
  useEffect(() => {
    if (!open) return;
    let closed = false;
    forkline
      .query(DashboardCompareCandidatesDocument, { id })
      .then((r) => {
        if (closed || !r.session) return;
        const s = r.session;
        setData({ parent: s.parent ?? null, siblings: s.siblings.edges.map((e) => e.node), children: s.children.edges.map((e) => e.node) });
      })
      .catch((err) => !closed && setError(errorText(err)));
    return () => {
      closed = true;
    };
  }, [open, id]);
  const peers = useMemo(
    () =>
      data
        ? [
            ...(data.parent ? [{ ...data.parent, rel: 'Parent', left: data.parent.id, right: id }] : []),
            ...data.siblings.map((s) => ({ ...s, rel: 'Sibling', left: id, right: s.id })),
            ...data.children.map((c) => ({ ...c, rel: 'Child', left: id, right: c.id })),
          ]
        : [],
    [data, id],
  );
  // Escape or a click outside closes it; Escape gives the focus back to its button.
  const root = useRef<HTMLDetailsElement>(null);
  const summary = useRef<HTMLElement>(null);
  // On the <details> itself: a click on the summary opens it at once, its toggle event (which sets `open`) comes a task later.
  useDismiss(
    () => !!root.current?.open,
    () => root.current && (root.current.open = false),
    root,
    summary,
  );
  return (
    <details class="compare-menu" open={open} ref={root} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary class="button" ref={summary}>
        Compare with…
      </summary>
      <div class="menu" role="group" aria-label="Compare with">
        {error && <p class="error">{error}</p>}
        {!data && !error && <p class="muted">Loading…</p>}
        {data && !peers.length && <p class="muted">No parent, siblings or children.</p>}
        <ul>
          {peers.map((p) => (
            <li key={`${p.rel}-${p.id}`}>
              <a href={diffPath(p.left, p.right)}>
                {p.rel}: {p.rel !== 'Parent' ? withForkSeq(visibleText(p.title || p.id), p.forkedAtSeq) : visibleText(p.title || p.id)}
              </a>
            </li>
          ))}
        </ul>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            if (other.trim()) navigate(diffPath(id, other.trim()));
          }}
        >
          <input aria-label="Session id to compare with" placeholder="or a session id (ses_…)" value={other} onInput={(e) => setOther(e.currentTarget.value)} />
          <button type="submit" class="small" disabled={!other.trim()}>
            Compare
          </button>
        </form>
      </div>
    </details>
  );
}

interface Peer {
  id: string;
  title?: string | null;
  forkedAtSeq?: number | null;
}
