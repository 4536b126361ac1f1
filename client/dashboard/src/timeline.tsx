// The raw event log: seq, type, inherited/synthetic badges, a one-line
// summary (the full data on demand) and "Fork at this event" on every row.
// `Timeline` renders the events it is given (the compare view);
// `VirtualTimeline` a whole log of any length: only the rows near the
// viewport exist, their pages fetched as they come into view; its start/end
// pairs (turns, steps, tool calls) show how long they lasted and collapse.
import { eventLabel } from './event-labels.ts';
import type { Ref } from 'preact';
import { memo } from './memo.ts';
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { eventSummary, type LogEvent } from './conversation.ts';
import { PAGE_SIZE, type EventPages } from './event-pages.ts';
import { CopyButton, JsonView } from './json-view.tsx';
import { eventDeepLink } from './router.ts';
import { TimelineForkLink } from './fork-markers.tsx';
import type { ForkPoints } from './fork-points.ts';
import { useVirtualizer } from './use-virtualizer.ts';
import { Badge } from './widgets.tsx';
import { rowKeys } from './row-keys.ts';
import { formatDuration } from './format.ts';
import { formatSpan, RowMap } from './timeline-spans.ts';

interface RowActions {
  onFork?: (seq: number) => void;
  busy?: boolean;
  /** For the deep link an open event offers to copy. */
  sessionId?: string;
  /** Where children were forked: the row of that seq links to them. */
  forkPoints?: ForkPoints;
}

export function Timeline(props: RowActions & { events: readonly LogEvent[] }) {
  const [open, setOpen] = useState<number | null>(null);
  const toggle = useCallback((seq: number) => setOpen((o) => (o === seq ? null : seq)), []);
  return (
    <table class="timeline" aria-label="Event timeline">
      <TimelineHead withActions={!!props.onFork} />
      {props.events.map((e) => (
        <EventRow key={e.seq} event={e} open={open === e.seq} onToggle={toggle} onFork={props.onFork} busy={props.busy} sessionId={props.sessionId} />
      ))}
    </table>
  );
}

/**
 * A row's height (styles.css fixes it, taller where controls are touch-sized), so rows not yet
 * loaded take their final place. The pane reads it from a rendered row: an estimate off by 2 px
 * made the rows near the top edge of the window bounce between two positions on every frame.
 */
const ROW_HEIGHT = 28;
/** Rows rendered beyond each edge of the viewport (a scroll renders the rows it brings in before the frame is painted). */
const OVERSCAN = 6;
/** Pages are asked for this many rows before they scroll into view (the next page is there when its rows are). */
const PREFETCH_ROWS = PAGE_SIZE / 2;

/** `version`: EventPages.version, so a change of the log renders the rows again. */
export function VirtualTimeline(props: RowActions & { pages: EventPages; version: number; jump: { seq: number; nonce: number } | null }) {
  const { pages } = props;
  const [open, setOpen] = useState<number | null>(null);
  // Collapsed spans by their start seq; their rows after the start are not rows of the table.
  const [collapsed, setCollapsed] = useState<ReadonlyMap<number, number>>(() => new Map());
  const collapse = useCallback(
    (start: number, end: number | null) =>
      setCollapsed((c) => {
        const next = new Map(c);
        if (end === null) next.delete(start);
        else next.set(start, end);
        return next;
      }),
    [],
  );
  const rowMap = useMemo(
    () =>
      new RowMap(
        pages.length,
        [...collapsed].map(([start, end]) => [start + 1, end] as const),
      ),
    [pages.length, collapsed],
  );
  const mapRef = useRef(rowMap);
  mapRef.current = rowMap;
  // Keys are seqs (an open row's measured height stays with its event when a span above collapses); one function for good (see below).
  const seqKey = useCallback((index: number) => mapRef.current.seqAt(index), []);
  const toggle = useCallback((seq: number) => setOpen((o) => (o === seq ? null : seq)), []);
  // Stable for the memoized rows: a scroll renders only the rows it brings in.
  const forkRef = useRef(props.onFork);
  forkRef.current = props.onFork;
  const fork = useCallback((seq: number) => forkRef.current?.(seq), []);
  const box = useRef<HTMLDivElement>(null);
  const head = useRef<HTMLTableSectionElement>(null);
  const [headHeight, setHeadHeight] = useState(ROW_HEIGHT);
  useLayoutEffect(() => setHeadHeight(head.current?.offsetHeight ?? ROW_HEIGHT), []);
  const [rowPx, setRowPx] = useState(ROW_HEIGHT);
  const rowHeight = useCallback(() => rowPx, [rowPx]);
  useLayoutEffect(() => {
    // Every render (a breakpoint crossed on resize changes it): one closed row's height, the first row of a row's tbody.
    const h = box.current?.querySelector('tbody[data-index] > tr:first-child')?.getBoundingClientRect().height;
    if (h && Math.abs(h - rowPx) > 0.01) setRowPx(h);
  });
  const v = useVirtualizer({
    count: rowMap.count,
    getScrollElement: () => box.current,
    // Options the virtualizer memoizes its row positions on (getItemKey, count…)
    // must keep their identity between renders: a new getItemKey each render
    // recomputed every row's position on every scroll frame (janky scrolling on
    // a long log).
    getItemKey: seqKey,
    estimateSize: rowHeight,
    overscan: OVERSCAN,
    scrollMargin: headHeight,
    // At the bottom, new events scroll in (virtual-core follows appends only for lists anchored at the end).
    anchorTo: 'end',
    followOnAppend: true,
    scrollEndThreshold: 40,
  });
  const rows = v.getVirtualItems();
  const first = rows[0]?.index ?? 0;
  const last = rows.at(-1)?.index ?? -1;
  useEffect(() => {
    // The pages of the rows shown and near them; never those of a collapsed span's hidden rows.
    if (last >= 0) for (const [from, to] of rowMap.seqRuns(first - PREFETCH_ROWS, last + PREFETCH_ROWS)) void pages.ensure(from, to).catch(() => {}); // retried on the next scroll
  }, [first, last, pages, rowMap]);

  // Opens at the latest events; a jump centres its seq.
  const placed = useRef<number | null>(null);
  useLayoutEffect(() => {
    const nonce = props.jump?.nonce ?? 0;
    if (!pages.length || placed.current === nonce) return;
    const seq = props.jump && props.jump.seq >= 0 ? Math.min(props.jump.seq, pages.length - 1) : pages.length - 1;
    // A jump into a collapsed span opens it (this runs again once it is open).
    const around = [...collapsed].filter(([start, end]) => start < seq && seq <= end);
    if (around.length) return setCollapsed((c) => new Map([...c].filter(([start]) => !around.some(([s]) => s === start))));
    placed.current = nonce;
    // A row holding the focus (a span's collapse button, a row's type) would be unmounted by the scroll anyway, the focus
    // falling to the body; let go of it first: with it still focused, Chromium moved the scroll after the write (following
    // the focused row) and the jump landed rows off, thousands after a span was collapsed and expanded.
    const focused = document.activeElement;
    if (focused instanceof HTMLElement && box.current?.contains(focused)) focused.blur();
    v.scrollToIndex(rowMap.indexOf(seq), { align: props.jump && props.jump.seq >= 0 ? 'center' : 'end' });
  }, [props.jump, pages.length > 0, collapsed]);

  // Rows are rowPx tall, so only an open one is measured; closed again, it takes that height back.
  const measured = useRef<number | null>(null);
  useLayoutEffect(() => {
    if (measured.current !== null && measured.current !== open) v.resizeItem(rowMap.indexOf(measured.current), rowPx);
    measured.current = open;
  }, [open]);
  const sizedAt = useRef(ROW_HEIGHT);
  useLayoutEffect(() => {
    if (sizedAt.current === rowPx) return;
    sizedAt.current = rowPx;
    v.measure(); // every row's place again at the new height (an open row is measured again as it renders)
  }, [rowPx]);

  const target = props.jump && props.jump.seq >= 0 ? props.jump.seq : undefined;
  // Item positions count from the scroll content's top (the head is the scroll margin); the total from below the head.
  const before = (rows[0]?.start ?? headHeight) - headHeight;
  const after = v.getTotalSize() + headHeight - (rows.at(-1)?.end ?? headHeight);
  const cols = props.onFork ? 5 : 4; // with the spans' collapse column
  return (
    <div ref={box} class="scroll timeline-scroll" data-testid="timeline-scroll">
      <table class="timeline virtual" aria-label="Event timeline" aria-rowcount={rowMap.count}>
        <TimelineHead headRef={head} withActions={!!props.onFork} withSpans />
        <Spacer height={before} cols={cols} />
        {rows.map((row) => {
          const seq = row.key as number;
          const e = pages.get(seq);
          const span = e && spanCell(pages, seq, collapsed);
          return e ? (
            <EventRow
              key={row.key}
              event={e}
              index={row.index}
              measure={open === e.seq ? v.measureElement : undefined}
              target={target === seq}
              spanText={span?.text}
              spanEnd={span?.end}
              spanCollapsed={span?.collapsed}
              onCollapse={collapse}
              open={open === e.seq}
              onToggle={toggle}
              onFork={props.onFork && fork}
              busy={props.busy}
              sessionId={props.sessionId}
              forks={props.forkPoints?.get(e.seq)}
            />
          ) : (
            <tbody key={row.key} data-index={row.index}>
              <tr class="placeholder">
                <td class="seq">{seq}</td>
                <td colSpan={cols - 1} class="muted">
                  …
                </td>
              </tr>
            </tbody>
          );
        })}
        <Spacer height={after} cols={cols} />
      </table>
    </div>
  );
}

function TimelineHead({ withActions, withSpans, headRef }: { withActions: boolean; withSpans?: boolean; headRef?: Ref<HTMLTableSectionElement> }) {
  return (
    <thead ref={headRef}>
      <tr>
        <th class="seq">seq</th>
        {withSpans && (
          <th class="span-cell">
            <span class="visually-hidden">collapse</span>
          </th>
        )}
        <th class="type">type</th>
        <th>event</th>
        {withActions && (
          <th class="actions">
            <span class="visually-hidden">actions</span>
          </th>
        )}
      </tr>
    </thead>
  );
}

/** Stands in for the rows above or below the rendered ones. */
const Spacer = ({ height, cols }: { height: number; cols: number }) =>
  height > 0 ? (
    <tbody aria-hidden="true">
      <tr class="spacer" style={{ height: `${height}px` }}>
        <td colSpan={cols} />
      </tr>
    </tbody>
  ) : null;

/** One event: its row and, when open, its data. A tbody of its own, so a windowed list measures both. */
const EventRow = memo(function EventRow(
  props: RowActions & {
    event: LogEvent;
    open: boolean;
    onToggle(seq: number): void;
    index?: number;
    measure?: (el: Element | null) => void;
    target?: boolean;
    /** Children forked at this event. */
    forks?: number;
    /** The span this row starts, ends or answers a call of, as words (`turn 3 · 1.2 s`). */
    spanText?: string;
    /** The row starts a span ending at this seq: it collapses. */
    spanEnd?: number;
    spanCollapsed?: boolean;
    onCollapse?(start: number, end: number | null): void;
  },
) {
  const e = props.event;
  const end = props.spanEnd;
  return (
    <tbody data-index={props.index} ref={props.measure}>
      <tr
        data-seq={e.seq}
        class={`${e.inherited ? 'inherited' : ''} ${e.synthetic ? 'synthetic' : ''}${props.target ? ' target' : ''} type-${e.type.replace(/\W/g, '-')}`}
        aria-current={props.target ? 'location' : undefined}
        onKeyDown={rowKeys}
      >
        <td class="seq">{e.seq}</td>
        {props.onCollapse && (
          <td class="span-cell">
            {end !== undefined && (
              <button
                type="button"
                class="span-toggle"
                data-control="span"
                tabIndex={-1} /* one tab stop per row: ArrowLeft from the type reaches it (row-keys.ts) */
                aria-expanded={!props.spanCollapsed}
                aria-label={`${props.spanCollapsed ? 'Expand' : 'Collapse'} ${props.spanText} (events ${e.seq}–${end})`}
                title={props.spanCollapsed ? `Show events ${e.seq + 1}–${end}` : `Hide events ${e.seq + 1}–${end}`}
                onClick={() => props.onCollapse!(e.seq, props.spanCollapsed ? null : end)}
              >
                <span aria-hidden="true">{props.spanCollapsed ? '▸' : '▾'}</span>
              </button>
            )}
          </td>
        )}
        <td class="type">
          <button
            type="button"
            class="link"
            data-control="type"
            aria-expanded={props.open}
            onClick={() => props.onToggle(e.seq)}
            title={e.type.startsWith('plugin/') ? e.type : undefined}
          >
            {eventLabel(e.type)}
          </button>
          {e.inherited && (
            <Badge tone="inherited" title="Copied from the parent by the fork">
              inherited
            </Badge>
          )}
          {e.synthetic && (
            <Badge tone="synthetic" title="Written by repair, not by a real actor">
              synthetic
            </Badge>
          )}
        </td>
        <td class="summary">
          {props.spanText && (
            <span class="span-extent" data-testid="span-extent">
              {props.spanText}
              {props.spanCollapsed && end !== undefined && ` · ${(end - e.seq).toLocaleString('en-US')} events hidden`}
            </span>
          )}
          {props.forks !== undefined && props.sessionId && <TimelineForkLink sessionId={props.sessionId} seq={e.seq} count={props.forks} />}
          {eventSummary(e)}
        </td>
        {props.onFork && (
          <td class="actions">
            {/* The name starts with the visible text: voice-control users say what they see. */}
            <button
              type="button"
              class="small fork-button"
              data-control="fork"
              tabIndex={-1} /* one tab stop per row: ArrowRight from the type reaches it (row-keys.ts) */
              disabled={props.busy}
              aria-label={`Fork here at event ${e.seq}`}
              title={`Fork at this event: a new session with events 0–${e.seq}`}
              onClick={() => props.onFork!(e.seq)}
            >
              Fork here
            </button>
          </td>
        )}
      </tr>
      {props.open && (
        <tr class="event-data">
          <td colSpan={(props.onFork ? 4 : 3) + (props.onCollapse ? 1 : 0)}>
            <EventData event={e} sessionId={props.sessionId} />
          </td>
        </tr>
      )}
    </tbody>
  );
});

/** An open event: its data as a collapsible tree, copyable, and a link to it. */
function EventData({ event: e, sessionId }: { event: LogEvent; sessionId?: string }) {
  const json = () => JSON.stringify({ id: e.id, seq: e.seq, type: e.type, createdAt: e.createdAt, data: e.data }, null, 2);
  return (
    <div class="event-detail" data-testid="event-data">
      <div class="event-detail-bar">
        <code class="muted">{e.id}</code>
        <span class="muted">{e.createdAt}</span>
        <CopyButton text={json} label="Copy JSON" what={`event ${e.seq}`} />
        {sessionId && <CopyButton text={() => eventDeepLink(sessionId, e.seq)} label="Copy link" what={`event ${e.seq}`} />}
      </div>
      <JsonView value={e.data} name="data" />
    </div>
  );
}

/** What a row of the virtual timeline says of its span: one it starts (collapsible once its end is held), ends, or a call it answers. */
function spanCell(pages: EventPages, seq: number, collapsed: ReadonlyMap<number, number>): { text: string; end?: number; collapsed?: boolean } | undefined {
  const { spans } = pages;
  const describe = (span: NonNullable<ReturnType<typeof spans.startingAt>>) =>
    formatSpan(
      span,
      spans.extent(
        span,
        (s) => pages.heldThrough(s),
        pages.length - 1,
        (s) => pages.get(s),
      ),
      formatDuration,
    );
  const starts = spans.startingAt(seq);
  if (starts) {
    const end = starts.end?.seq;
    return end !== undefined && end > seq ? { text: describe(starts), end, collapsed: collapsed.has(seq) } : { text: describe(starts) };
  }
  const call = spans.callAt(seq);
  if (call) return { text: call.durationMs === undefined ? 'call' : `call · ${formatDuration(call.durationMs)}` };
  const ends = spans.endingAt(seq);
  return ends && { text: `end of ${describe(ends)}` };
}
