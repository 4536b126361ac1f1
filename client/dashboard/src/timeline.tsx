// The raw event log: seq, type, inherited/synthetic badges, a one-line
// summary (the full data on demand) and "Fork at this event" on every row.
// `Timeline` renders the events it is given (the compare view);
// `VirtualTimeline` a whole log of any length: only the rows near the
// viewport exist, their pages fetched as they come into view.
import { eventLabel } from './event-labels.ts';
import type { Ref } from 'preact';
import { memo } from './memo.ts';
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { eventSummary, type LogEvent } from './conversation.ts';
import { PAGE_SIZE, type EventPages } from './event-pages.ts';
import { CopyButton, JsonView } from './json-view.tsx';
import { eventDeepLink } from './router.ts';
import { TimelineForkLink } from './fork-markers.tsx';
import type { ForkPoints } from './fork-points.ts';
import { useVirtualizer } from './use-virtualizer.ts';
import { Badge } from './widgets.tsx';
import { rowKeys } from './row-keys.ts';

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

/** A row's height (styles.css fixes it), so rows not yet loaded take their final place. */
const ROW_HEIGHT = 28;
const rowHeight = () => ROW_HEIGHT;
/** Rows rendered beyond each edge of the viewport (a scroll renders the rows it brings in before the frame is painted). */
const OVERSCAN = 6;
/** Pages are asked for this many rows before they scroll into view (the next page is there when its rows are). */
const PREFETCH_ROWS = PAGE_SIZE / 2;

/** `version`: EventPages.version, so a change of the log renders the rows again. */
export function VirtualTimeline(props: RowActions & { pages: EventPages; version: number; jump: { seq: number; nonce: number } | null }) {
  const { pages } = props;
  const [open, setOpen] = useState<number | null>(null);
  const toggle = useCallback((seq: number) => setOpen((o) => (o === seq ? null : seq)), []);
  // Stable for the memoized rows: a scroll renders only the rows it brings in.
  const forkRef = useRef(props.onFork);
  forkRef.current = props.onFork;
  const fork = useCallback((seq: number) => forkRef.current?.(seq), []);
  const box = useRef<HTMLDivElement>(null);
  const head = useRef<HTMLTableSectionElement>(null);
  const [headHeight, setHeadHeight] = useState(ROW_HEIGHT);
  useLayoutEffect(() => setHeadHeight(head.current?.offsetHeight ?? ROW_HEIGHT), []);
  const v = useVirtualizer({
    count: pages.length,
    getScrollElement: () => box.current,
    // Options the virtualizer memoizes its row positions on (getItemKey, count…)
    // must keep their identity between renders: a new getItemKey each render
    // recomputed every row's position on every scroll frame (janky scrolling on
    // a long log). The default key is the index, as wanted here.
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
    if (last >= 0) void pages.ensure(first - PREFETCH_ROWS, last + PREFETCH_ROWS).catch(() => {}); // retried on the next scroll
  }, [first, last, pages]);

  // Opens at the latest events; a jump centres its seq.
  const placed = useRef<number | null>(null);
  useLayoutEffect(() => {
    const nonce = props.jump?.nonce ?? 0;
    if (!pages.length || placed.current === nonce) return;
    placed.current = nonce;
    const seq = props.jump && props.jump.seq >= 0 ? Math.min(props.jump.seq, pages.length - 1) : pages.length - 1;
    v.scrollToIndex(seq, { align: props.jump && props.jump.seq >= 0 ? 'center' : 'end' });
  }, [props.jump, pages.length > 0]);

  // Rows are ROW_HEIGHT tall, so only an open one is measured; closed again, it takes that height back.
  const measured = useRef<number | null>(null);
  useLayoutEffect(() => {
    if (measured.current !== null && measured.current !== open) v.resizeItem(measured.current, ROW_HEIGHT);
    measured.current = open;
  }, [open]);

  const target = props.jump && props.jump.seq >= 0 ? props.jump.seq : undefined;
  // Item positions count from the scroll content's top (the head is the scroll margin); the total from below the head.
  const before = (rows[0]?.start ?? headHeight) - headHeight;
  const after = v.getTotalSize() + headHeight - (rows.at(-1)?.end ?? headHeight);
  const cols = props.onFork ? 4 : 3;
  return (
    <div ref={box} class="scroll timeline-scroll" data-testid="timeline-scroll">
      <table class="timeline virtual" aria-label="Event timeline" aria-rowcount={pages.length}>
        <TimelineHead headRef={head} withActions={!!props.onFork} />
        <Spacer height={before} cols={cols} />
        {rows.map((row) => {
          const e = pages.get(row.index);
          return e ? (
            <EventRow
              key={row.key}
              event={e}
              index={row.index}
              measure={open === e.seq ? v.measureElement : undefined}
              target={target === row.index}
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
                <td class="seq">{row.index}</td>
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

function TimelineHead({ withActions, headRef }: { withActions: boolean; headRef?: Ref<HTMLTableSectionElement> }) {
  return (
    <thead ref={headRef}>
      <tr>
        <th class="seq">seq</th>
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
  },
) {
  const e = props.event;
  return (
    <tbody data-index={props.index} ref={props.measure}>
      <tr
        data-seq={e.seq}
        class={`${e.inherited ? 'inherited' : ''} ${e.synthetic ? 'synthetic' : ''}${props.target ? ' target' : ''} type-${e.type.replace(/\W/g, '-')}`}
        aria-current={props.target ? 'location' : undefined}
        onKeyDown={rowKeys}
      >
        <td class="seq">{e.seq}</td>
        <td class="type">
          <button
            type="button"
            class="link"
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
          {props.forks !== undefined && props.sessionId && <TimelineForkLink sessionId={props.sessionId} seq={e.seq} count={props.forks} />}
          {eventSummary(e)}
        </td>
        {props.onFork && (
          <td class="actions">
            {/* The name starts with the visible text: voice-control users say what they see. */}
            <button
              type="button"
              class="small fork-button"
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
          <td colSpan={props.onFork ? 4 : 3}>
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
