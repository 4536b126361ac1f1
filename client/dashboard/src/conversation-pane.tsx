// The conversation of a long session, windowed twice: only a window of the
// log's pages is loaded and folded (it opens on the latest pages, grows as the
// reader scrolls up or down, jumps to the start or to a seq), and only the
// items near the viewport are in the DOM (@tanstack/virtual-core). The log
// outside the window is an empty stretch sized by its events, so the
// scrollbar spans the whole log: a scroll that lands far outside the window
// (a dragged thumb, Home, End) folds the page there, fetched directly, not
// every page in between.
import { memo } from './memo.ts';
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { foldConversation, type ConversationItem } from './conversation.ts';
import { Item, itemKey, LiveStepItem, type ItemProps, type RowProps } from './conversation-view.tsx';
import { ForkPointRow, type KnownChild } from './fork-markers.tsx';
import { NO_FORK_POINTS, withForkPoints, type ForkPointItem, type ForkPoints } from './fork-points.ts';
import { PAGE_SIZE, pageOf, type EventPages } from './event-pages.ts';
import type { LiveStep } from './session-log.ts';
import { keepAtEnd, type KeepAtEnd } from './keep-at-end.ts';
import { useSessionTitles } from './session-titles.ts';
import { useVirtualizer } from './use-virtualizer.ts';

/** A fold needs its turn's start: look back this many pages for one before folding mid-turn. */
const MAX_LOOKBACK_PAGES = 5;
/**
 * Pages folded at most; growing past it drops the far side (fetched again, from the HTTP cache, when
 * scrolled back to). Each page added folds the whole window again: 10 pages fold in about 20–30 ms,
 * 40 took 200–400 ms (a long task on every page while scrolling).
 */
const MAX_WINDOW_PAGES = 10;

/** Scrolled this close to an edge of the window, the next page loads. */
const EDGE_PX = 600;
/** A scroll far outside the window moves it once the scroll has rested this long (a fling folds no page it passes). */
const REST_MS = 90;

/** The log outside the window: this many px per event, at most MAX_SPACER_PX in all (browsers cap an element's height). */
const SPACER_PX_PER_EVENT = 24;
const MAX_SPACER_PX = 8_000_000;

/** Pages lo..hi of the log; hi null: through the end, following live appends. */
interface LogWindow {
  lo: number;
  hi: number | null;
  /** Pages added below `lo` only to reach a turn start (the pages asked for start at `lo + lookback`). */
  lookback: number;
  /**
   * Grown (up or down) from a fold that began mid-turn (its start beyond a look-back): the window folds mid-turn
   * too, no look-back (growing down inside a long turn looked back 5 pages, one fold each, for every page added).
   */
  midTurn?: boolean;
  /** A seq to scroll to and highlight once folded (dropped when the window grows past it). */
  target?: number;
  /** Moved there by a scroll (the target is where the reader scrolled to): not highlighted. */
  scrolledTo?: number;
}

export interface Jump {
  /** -1: the latest events. */
  seq: number;
  nonce: number;
}

export const openingWindow = (length: number): LogWindow => ({ lo: Math.max(0, pageOf(Math.max(0, length - 1)) - 1), hi: null, lookback: 0 });

/** The window around the page the reader scrolled to, far from the one folded: that page is fetched directly. */
export const windowScrolledTo = (seq: number, length: number, moves: number): LogWindow => ({ ...windowForJump(seq, length), scrolledTo: moves });

export function windowForJump(seq: number, length: number): LogWindow {
  if (seq < 0) return openingWindow(length);
  const page = pageOf(Math.min(seq, Math.max(0, length - 1)));
  const lastPage = pageOf(Math.max(0, length - 1));
  // A page of margin above the target: placed near the window's top edge, it would grow the window
  // upward while virtual-core still settles the jump, which skips its scroll anchoring (the target is lost).
  return { lo: Math.max(0, page - 1), hi: page + 1 >= lastPage ? null : page + 1, lookback: 0, target: seq };
}

/** Where the fold of a window starts: at its first turn start (the log's start for page 0). */
export function foldStart(events: readonly { seq: number; type: string }[], lo: number): number | undefined {
  if (lo === 0) return 0;
  return events.find((e) => e.type === 'turn/start')?.seq;
}

/**
 * The last seq the fold must show: the target, and the first page asked for (before any look-back). A fold
 * from a turn start after that page would show none of it: a window grown upward through a turn longer than
 * the window would show nothing new, grow again, and end up trimmed of the very items shown.
 */
const mustShow = (win: LogWindow): number => Math.min(win.target ?? Infinity, (win.lo + win.lookback + 1) * PAGE_SIZE - 1);

export function ConversationPane(
  /** `version`: EventPages.version, so a change of the log renders the pane again. */
  props: ItemProps & {
    pages: EventPages;
    version: number;
    live: LiveStep | null;
    jump: Jump | null;
    /** Where children were forked: a marker row after the items through that seq. */
    forkPoints?: ForkPoints;
    /** Children the page knows (named in the markers). */
    knownChildren?: readonly KnownChild[];
  },
) {
  const { pages } = props;
  // A page opened at an event (a deep link) starts at that event's window, not at the latest one and then jumps.
  const [win, setWin] = useState<LogWindow>(() => (props.jump ? windowForJump(props.jump.seq, pages.length) : openingWindow(pages.length)));
  useEffect(() => {
    if (props.jump) setWin(windowForJump(props.jump.seq, pages.length));
  }, [props.jump]);

  const lastPage = pageOf(Math.max(0, pages.length - 1));
  const hi = win.hi ?? lastPage;
  const from = win.lo * PAGE_SIZE;
  const to = (hi + 1) * PAGE_SIZE - 1;
  useEffect(() => {
    void pages.ensure(from, to).catch(() => {}); // the feed reports errors; a later scroll retries
  }, [from, to, pages.length]);

  // The loaded window, folded from its first turn start (or mid-turn when none is near).
  const folded = useMemo(() => {
    const events = pages.slice(from, to);
    if (!events) return undefined;
    let start = foldStart(events, win.lo);
    const needsEarlier = win.lo > 0 && (start === undefined || start > mustShow(win));
    if (needsEarlier && win.lookback < MAX_LOOKBACK_PAGES && !win.midTurn) return { needsEarlier: true as const };
    const midTurn = win.lo > 0 && (start === undefined || needsEarlier);
    if (midTurn) start = from;
    const items = foldConversation(
      events.filter((e) => e.seq >= start!),
      { partial: win.lo > 0, endsBeforeLog: win.hi !== null },
    );
    return { items, midTurn, start: start!, lo: win.lo, hi: win.hi };
  }, [pages, pages.rangeVersion(from, to), from, to, win]); // not refolded when the timeline loads pages elsewhere

  useEffect(() => {
    if (folded && 'needsEarlier' in folded) setWin((w) => ({ ...w, lo: w.lo - 1, lookback: w.lookback + 1 }));
  }, [folded]);

  const [items, setItems] = useState<{
    items: Array<ConversationItem | ForkPointItem>;
    start: number;
    midTurn: boolean;
    /** The window folded (`win` moves first; the spacers follow the items, so both change in one render). */
    lo: number;
    hi: number | null;
  } | null>(null);
  const forkPoints = props.forkPoints ?? NO_FORK_POINTS;
  useLayoutEffect(() => {
    if (folded && !('needsEarlier' in folded))
      setItems({ ...folded, items: withForkPoints(folded.items, forkPoints, folded.start, Math.min(to, pages.length - 1)) });
  }, [folded, forkPoints]);

  const markerParents = useMemo(() => items?.items.flatMap((i) => (i.kind === 'fork-marker' ? [i.parentSessionId] : [])) ?? [], [items]);
  const known = props.knownChildren ?? [];
  const titleOf = useSessionTitles(markerParents);

  const list = items?.items ?? [];
  const showLive = win.hi === null && !!props.live && !!(props.live.text || props.live.tool);
  const count = list.length + (showLive ? 1 : 0);
  const box = useRef<HTMLDivElement>(null);
  // Fixed for the page's life (a scale that moved would move what the reader sees).
  const [pxPerEvent] = useState(() => Math.min(SPACER_PX_PER_EVENT, MAX_SPACER_PX / Math.max(1, pages.length)));
  const spacer = spacers(items, pages.length, pxPerEvent);
  const v = useVirtualizer({
    count,
    getScrollElement: () => box.current,
    estimateSize: () => 64,
    overscan: 6,
    gap: 8,
    paddingStart: spacer.above + (items && items.start > 0 ? 34 : 10), // room for the window's edge line
    paddingEnd: spacer.below + 10,
    scrollPaddingStart: 12, // a jumped-to item's outline stays in view
    getItemKey: (i) => (i < list.length ? itemKey(list[i]) : 'live'),
    // Prepending earlier pages keeps the reader's item in place; at the bottom, appends are followed.
    anchorTo: 'end',
    followOnAppend: true,
    scrollEndThreshold: 40,
  });

  // Kept at its end while the reader is there (keep-at-end.ts): rows measured after the first scroll to the
  // end, a turn's figures arriving, a composer or window that shortens the box. Scrolling up lets go.
  const keeper = useRef<KeepAtEnd | null>(null);
  useLayoutEffect(() => {
    const k = keepAtEnd(box.current!);
    keeper.current = k;
    return k.stop;
  }, []);
  const watchList = useCallback((el: HTMLOListElement | null) => keeper.current?.content(el), []);

  // Opens at the latest item; a jump scrolls to its target's item. The reader is placed once per window a jump
  // or a far scroll made, never again as it grows: a window grown down past its target (dropping the target's
  // page) is not a window "at the end", and placing it there leapt to the stretch below it, i.e. the log's end.
  const placed = useRef<string | null>(null);
  useLayoutEffect(() => {
    if (!items || !count) return;
    const place = `${props.jump?.nonce ?? 0}:${win.scrolledTo ?? 0}`;
    if (placed.current === place) return;
    placed.current = place;
    if (win.target === undefined) {
      v.scrollToEnd(); // the box's end (its padding below the last item included), retargeted as rows are measured
      keeper.current?.hold();
    } else {
      keeper.current?.release();
      v.scrollToIndex(Math.max(0, targetIndex(list, win.target)), { align: 'start' });
    }
  }, [items, count]);

  // Far outside the window (more than a page of spacer away): once the scroll rests there (a fling passes
  // pages without folding each), the window moves to the page in view, or to the end when the scroll is at
  // the bottom. Near the top of the window: fold the page before it; near its bottom (when it stops short of
  // the end): the next.
  const scrollMoves = useRef(0);
  const resting = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(resting.current), []);
  const folds = useRef(items);
  folds.current = items;
  const moveToView = () => {
    const el = box.current;
    const items = folds.current; // as the scroll left it, not as the render that set the timer saw it
    if (!el || !items) return;
    const moves = ++scrollMoves.current;
    if (el.scrollTop + el.clientHeight >= el.scrollHeight - 2)
      return setWin((w) => (w.hi === null && w.target === undefined ? w : { ...openingWindow(pages.length), scrolledTo: moves }));
    const at = seqInStretch(el.scrollTop, v.options.paddingStart, v.getTotalSize() - v.options.paddingEnd, items.hi ?? lastPage, pxPerEvent, pages.length);
    // Already going there (its fold may have looked back a page or two): nothing new.
    setWin((w) => (w.target !== undefined && pageOf(w.target) === pageOf(at) ? w : windowScrolledTo(at, pages.length, moves)));
  };
  const grow = () => {
    const el = box.current;
    if (!el || !items || placed.current === null) return;
    const top = v.options.paddingStart;
    const bottom = v.getTotalSize() - v.options.paddingEnd;
    const far = PAGE_SIZE * pxPerEvent;
    const viewBottom = el.scrollTop + el.clientHeight;
    clearTimeout(resting.current);
    if (viewBottom < top - far || el.scrollTop > bottom + far) {
      resting.current = setTimeout(moveToView, REST_MS);
    } else if (el.scrollTop < top + EDGE_PX && win.lo > 0) {
      setWin((w) => ({ ...w, lo: w.lo - 1, lookback: 0, midTurn: items.midTurn, hi: trimmedHi(w.lo - 1, w.hi, lastPage) }));
    } else if (win.hi !== null && bottom - viewBottom < EDGE_PX) {
      setWin((w) => {
        const next = (w.hi ?? lastPage) + 1;
        const lo = Math.max(w.lo, next - MAX_WINDOW_PAGES + 1);
        const target = w.target !== undefined && w.target >= lo * PAGE_SIZE ? w.target : undefined;
        // Still the window a jump or scroll made (scrolledTo kept): growing it places no one.
        return { lo, lookback: 0, midTurn: items.midTurn, hi: next >= lastPage ? null : next, target, scrolledTo: w.scrolledTo };
      });
    }
  };
  // A window shorter than the viewport grows at once; one that left the viewport in the spacer (a page
  // shorter than the stretch that stood for it) grows or moves without waiting for another scroll.
  useEffect(() => {
    const el = box.current;
    if (!el || !items) return;
    const top = v.options.paddingStart;
    const bottom = v.getTotalSize() - v.options.paddingEnd;
    if (bottom - top <= el.clientHeight + EDGE_PX || el.scrollTop + el.clientHeight <= top || el.scrollTop >= bottom) grow();
  }, [items]);

  const rows = v.getVirtualItems();
  // The item holding the seq jumped to, or the first after it (turn and step starts have no item).
  const targetAt = useMemo(() => (win.target === undefined || win.scrolledTo ? -1 : targetIndex(list, win.target)), [list, win.target, win.scrolledTo]);
  // Stable for the memoized rows: a scroll renders only the items it brings in (and a new page of the log none).
  const actions = useRef(props);
  actions.current = props;
  const branch = useCallback((seq: number, turn: number) => actions.current.onBranch?.(seq, turn), []);
  const edit = useCallback((input: { seq: number; inputId: string; text: string }) => actions.current.onEdit?.(input), []);
  const fork = useCallback((seq: number) => actions.current.onFork?.(seq), []);
  const rowProps = (index: number, start: number) => placement(index, start, index === targetAt, v.measureElement);
  // Scrolled into the stretch that stands for pages not folded yet: where the window is going, until it is there.
  const viewTop = v.scrollOffset ?? 0;
  const contentEnd = v.getTotalSize() - v.options.paddingEnd;
  const outside = viewTop + (v.scrollRect?.height ?? 0) <= v.options.paddingStart || viewTop >= contentEnd;
  const movingTo = items && outside ? seqInStretch(viewTop, v.options.paddingStart, contentEnd, items.hi ?? lastPage, pxPerEvent, pages.length) : null;
  return (
    <div ref={box} class="scroll virtual" onScroll={grow} data-testid="conversation-scroll">
      {items === null ? (
        <p class="muted">Loading…</p>
      ) : !count ? (
        <p class="muted">Nothing yet: send a message.</p>
      ) : (
        <ol ref={watchList} class="conversation virtual-list" aria-label="Conversation" style={{ height: `${v.getTotalSize()}px` }}>
          {items.start > 0 && <WindowEdge start={items.start} midTurn={items.midTurn} at={spacer.above} />}
          {movingTo !== null && (
            <li class="window-loading muted" style={{ transform: `translateY(${v.scrollOffset ?? 0}px)` }} data-testid="window-loading">
              Loading events from #{movingTo.toLocaleString('en-US')}…
            </li>
          )}
          {rows.map((row) =>
            row.index < list.length ? (
              list[row.index].kind === 'fork-point' ? (
                <ForkPointRow
                  key={row.key}
                  item={list[row.index] as ForkPointItem}
                  sessionId={props.sessionId ?? ''}
                  known={known}
                  row={rowProps(row.index, row.start)}
                />
              ) : (
                <PlacedItem
                  key={row.key}
                  item={list[row.index] as ConversationItem}
                  index={row.index}
                  start={row.start}
                  target={row.index === targetAt}
                  measure={v.measureElement}
                  onBranch={props.onBranch && branch}
                  onEdit={props.onEdit && edit}
                  onFork={props.onFork && fork}
                  busy={props.busy}
                  titleOf={titleOf}
                  sessionId={props.sessionId}
                />
              )
            ) : (
              props.live && <LiveStepItem key="live" live={props.live} row={rowProps(row.index, row.start)} />
            ),
          )}
        </ol>
      )}
    </div>
  );
}

/** An item at its place in the window; re-rendered only when one of its props changes (not on every scroll frame). */
const PlacedItem = memo(function PlacedItem({
  index,
  start,
  target,
  measure,
  ...props
}: ItemProps & { item: ConversationItem; index: number; start: number; target: boolean; measure: (el: Element | null) => void }) {
  return <Item {...props} row={placement(index, start, target, measure)} />;
});

/** The attributes that place an item in the virtual list (and measure it). */
const placement = (index: number, start: number, target: boolean, measure: (el: Element | null) => void): RowProps => ({
  'data-index': index,
  ref: measure,
  style: { transform: `translateY(${start}px)` },
  'data-target': target || undefined,
});

/** The first loaded event: earlier ones load on scrolling up (`at`: the spacer above it). */
function WindowEdge({ start, midTurn, at }: { start: number; midTurn: boolean; at: number }) {
  return (
    <li class="window-edge muted" data-testid="window-edge" style={{ transform: `translateY(${at}px)` }}>
      {midTurn ? `From event #${start}, inside a turn whose start is not loaded` : `From event #${start}`} · scroll up for earlier events
    </li>
  );
}

/** The seq at `y` in the stretch above the window's content (`top`) or below it (`bottom`, after page `hi`). */
function seqInStretch(y: number, top: number, bottom: number, hi: number, pxPerEvent: number, length: number): number {
  const seq = y < top ? y / pxPerEvent : (hi + 1) * PAGE_SIZE + (y - bottom) / pxPerEvent;
  return Math.max(0, Math.min(Math.floor(seq), length - 1));
}

/** The px that stand for the log before and after the folded window. */
function spacers(items: { lo: number; hi: number | null } | null, length: number, pxPerEvent: number) {
  if (!items) return { above: 0, below: 0 };
  const after = items.hi === null ? 0 : Math.max(0, length - (items.hi + 1) * PAGE_SIZE);
  return { above: Math.round(items.lo * PAGE_SIZE * pxPerEvent), below: Math.round(after * pxPerEvent) };
}

const trimmedHi = (lo: number, hi: number | null, lastPage: number): number | null =>
  (hi ?? lastPage) - lo + 1 > MAX_WINDOW_PAGES ? lo + MAX_WINDOW_PAGES - 1 : hi;

const coversSeq = (item: { seqs: number[] }, seq: number) => item.seqs[0] <= seq && seq <= Math.max(...item.seqs);

/** The item holding `seq`, else the first after it. */
function targetIndex(items: readonly { seqs: number[] }[], seq: number): number {
  const holding = items.findIndex((i) => coversSeq(i, seq));
  return holding >= 0 ? holding : items.findIndex((i) => i.seqs[0] >= seq);
}
