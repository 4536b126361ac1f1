// Compare by turns: the conversation-level diff of two sessions of one tree.
// Both logs are folded from the turn at their divergence on (the shared
// prefix before it is the same conversation and is not read; a long tail a
// window of pages at a time, "Compare further" adding more), aligned by turn
// number (conversation-diff.ts), each row the same turn on both sides, the
// rows that differ marked, with previous/next difference. The sides are the
// diff page's EventPages, which follow live appends: a turn either side adds
// appears (and is compared) as it is stored. Only the rows in and near the
// viewport are in the DOM (the windowing of the timeline and conversation
// panes, use-virtualizer.ts), whatever the number of turns compared.
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { SessionSummaryFragment } from '../../generated/graphql.ts';
import { alignTurns, nextDifference, rowsThrough, turnsOf, turnStartAtOrBefore, type TurnRow, type TurnView } from './conversation-diff.ts';
import { PAGE_SIZE, pageOf, type EventPages } from './event-pages.ts';
import { eventPath } from './router.ts';
import { shownName } from './format.ts';
import { Badge } from './widgets.tsx';
import './compare-turns.css';
import { LongText } from './long-text.tsx';
import { useVirtualizer } from './use-virtualizer.ts';

/** Pages looked back from the divergence for the start of the turn it lies in. */
const MAX_LOOKBACK_PAGES = 5;

/** The seq both folds start at: the turn/start of the turn holding the first divergent seq (shared, so read from the left). */
function useFoldStart(prefix: number, left: EventPages): number | undefined {
  const [start, setStart] = useState<number | undefined>(prefix < 0 ? 0 : undefined);
  useEffect(() => {
    if (prefix < 0) return;
    let closed = false;
    void (async () => {
      const last = pageOf(prefix);
      for (let page = last; page >= Math.max(0, last - MAX_LOOKBACK_PAGES); page--) {
        await left.ensure(page * PAGE_SIZE, prefix);
        const found = turnStartAtOrBefore(left.slice(page * PAGE_SIZE, prefix) ?? [], prefix);
        if (found !== undefined) return void (!closed && setStart(found));
      }
      if (!closed) setStart(Math.max(0, (last - MAX_LOOKBACK_PAGES) * PAGE_SIZE)); // no turn start near: from the oldest page looked at
    })().catch(() => {});
    return () => {
      closed = true;
    };
  }, [prefix, left]);
  return start;
}

/** Pages of each side folded at first, and added by each "Compare further" (a long tail is not read whole). */
const TAIL_PAGES = 20;

interface SideTurns {
  turns: TurnView[];
  /** Set when the fold stops before the log's end: the last turn number it holds whole. */
  through?: number;
}

/** A side's turns from `start` through `pageCount` pages or the end of its log (undefined until all of that is loaded). */
function useTurns(pages: EventPages, start: number | undefined, version: string, pageCount: number): SideTurns | undefined {
  const last = pages.length - 1;
  const end = start === undefined ? last : Math.min(last, start + pageCount * PAGE_SIZE - 1);
  useEffect(() => {
    if (start !== undefined) void pages.ensure(start, end).catch(() => {}); // each page once; appends arrive live
  }, [start, end, pages]);
  return useMemo(() => {
    const events = start === undefined ? undefined : pages.slice(start, end);
    if (!events) return undefined;
    const turns = turnsOf(events);
    if (end >= last) return { turns };
    // Cut short: a turn the window ends inside is not compared yet.
    if (turns.length && turns[turns.length - 1].end === null) turns.pop();
    return { turns, through: turns.length ? turns[turns.length - 1].turn : 0 };
  }, [start, end, last, version, pages]);
}

export function TurnDiff(props: {
  left: SessionSummaryFragment;
  right: SessionSummaryFragment;
  prefix: number;
  leftPages: EventPages;
  rightPages: EventPages;
  version: string;
}) {
  const start = useFoldStart(props.prefix, props.leftPages);
  const [pageCount, setPageCount] = useState(TAIL_PAGES);
  const leftTurns = useTurns(props.leftPages, start, props.version, pageCount);
  const rightTurns = useTurns(props.rightPages, start, props.version, pageCount);
  const rows = useMemo(
    () => (leftTurns && rightTurns ? rowsThrough(alignTurns(leftTurns.turns, rightTurns.turns), [leftTurns.through, rightTurns.through]) : undefined),
    [leftTurns, rightTurns],
  );
  const cutShort = leftTurns?.through !== undefined || rightTurns?.through !== undefined;
  const differences = rows?.filter((r) => !r.same).length ?? 0;
  const [current, setCurrent] = useState(-1);
  const box = useRef<HTMLDivElement>(null);
  const list = useRef<HTMLDivElement>(null);
  // The rows' list starts below the note on the shared history: its offset in the scroll box.
  const [listTop, setListTop] = useState(0);
  useLayoutEffect(() => {
    const top = list.current?.offsetTop;
    if (top !== undefined && top !== listTop) setListTop(top);
  });
  // Kept while the rows are (the virtualizer recomputes every row's place when getItemKey changes).
  const rowKey = useCallback((i: number) => rows?.[i]?.turn ?? i, [rows]);
  const v = useVirtualizer({
    count: rows?.length ?? 0,
    getScrollElement: () => box.current,
    estimateSize: () => ROW_ESTIMATE_PX,
    overscan: 4,
    gap: ROW_GAP_PX,
    scrollMargin: listTop,
    scrollPaddingStart: ROW_GAP_PX, // the current row's outline stays in view
    getItemKey: rowKey,
  });
  const go = (index: number) => {
    if (index < 0 || !rows) return;
    setCurrent(index);
    v.scrollToIndex(index, { align: 'auto' }); // a row out of the window is not in the DOM to scroll into view
  };
  // Opens at the first difference.
  const opened = useRef(false);
  useLayoutEffect(() => {
    if (!rows || opened.current) return;
    opened.current = true;
    go(nextDifference(rows, -1, 1));
  }, [rows]);
  const ordinal = rows && current >= 0 ? rows.slice(0, current + 1).filter((r) => !r.same).length : 0;
  return (
    <>
      <div class="turn-diff-bar" role="toolbar" aria-label="Differences">
        <span data-testid="turn-diff-count" aria-live="polite">
          {rows === undefined
            ? 'Reading both conversations from the divergence…'
            : // Cut short, the count is of the turns compared so far: "571 of 571" read as the whole of a 14,000-turn tail.
              `${differences} of ${cutShort ? `the first ${rows.length} turns compared` : `${rows.length} turns`} differ${current >= 0 && !rows[current].same ? ` · difference ${ordinal} of ${differences}` : ''}`}
        </span>
        <button
          type="button"
          class="small"
          disabled={!rows || nextDifference(rows, current, -1) < 0}
          onClick={() => rows && go(nextDifference(rows, current, -1))}
        >
          Previous difference
        </button>
        <button
          type="button"
          class="small"
          disabled={!rows || nextDifference(rows, current, 1) < 0}
          onClick={() => rows && go(nextDifference(rows, current, 1))}
        >
          Next difference
        </button>
        {/* In the bar, not below the last row: there it moved as the rows near it were measured, and a click
            made as it moved landed on a row. */}
        {cutShort && (
          <span class="turn-diff-further">
            <span class="muted">Compared through turn {rows?.at(-1)?.turn ?? '—'}: the logs go on.</span>{' '}
            <button type="button" class="small" onClick={() => setPageCount((n) => n + TAIL_PAGES)}>
              Compare further
            </button>
          </span>
        )}
      </div>
      <div
        ref={box}
        class="scroll turn-diff-scroll"
        data-testid="turn-diff"
        role="table"
        aria-label="Turns of both sessions, aligned by turn number"
        aria-rowcount={rows?.length}
      >
        {start !== undefined && start > 0 && (
          <p class="muted turn-diff-note">Turns before #{start} are the same in both (their shared history) and not shown.</p>
        )}
        {rows && rows.length > 0 && (
          <div ref={list} class="turn-diff-list" role="rowgroup" style={{ height: `${v.getTotalSize()}px` }}>
            {v.getVirtualItems().map((item) => (
              <TurnLine
                key={item.key}
                row={rows[item.index]}
                index={item.index}
                top={item.start - listTop}
                measure={v.measureElement}
                current={item.index === current}
                left={props.left.id}
                right={props.right.id}
              />
            ))}
          </div>
        )}
        {rows?.length === 0 && !cutShort && <p class="muted">Neither session has a turn after the divergence.</p>}
      </div>
    </>
  );
}

/** A row's height before it is measured (rows differ in height: each is measured as it renders). */
const ROW_ESTIMATE_PX = 90;
/** The space between rows (compare-turns.css). */
const ROW_GAP_PX = 8;

function TurnLine(props: { row: TurnRow; index: number; top: number; measure: (el: Element | null) => void; current: boolean; left: string; right: string }) {
  const { row, current, left, right } = props;
  return (
    <div
      ref={props.measure}
      data-index={props.index}
      aria-rowindex={props.index + 1}
      style={{ transform: `translateY(${props.top}px)` }}
      role="row"
      class={`turn-row ${row.same ? 'same' : 'differs'}${current ? ' current' : ''}`}
      data-turn={row.turn}
      aria-current={current ? 'location' : undefined}
      data-testid="turn-row"
    >
      <TurnCell turn={row.turn} view={row.left} sessionId={left} testId="turn-left" same={row.same} />
      <TurnCell turn={row.turn} view={row.right} sessionId={right} testId="turn-right" same={row.same} />
    </div>
  );
}

function TurnCell({ turn, view: t, sessionId, testId, same }: { turn: number; view: TurnView | undefined; sessionId: string; testId: string; same: boolean }) {
  if (!t)
    return (
      <div role="cell" class="turn-cell missing" data-testid={testId}>
        <span class="muted">no turn {turn} in this session</span>
      </div>
    );
  return (
    <div role="cell" class="turn-cell" data-testid={testId}>
      <div class="turn-cell-head">
        <a href={eventPath(sessionId, t.startSeq)}>turn {t.turn}</a>
        {t.end ? <Badge tone={`reason-${t.end}`}>{t.end}</Badge> : <Badge tone="live">running</Badge>}
        {!same && <Badge tone="differs">differs</Badge>}
        {t.model && <span class="muted">{shownName(t.model)}</span>}
        <span class="seq">
          #{t.startSeq}–{t.lastSeq}
        </span>
      </div>
      {t.input !== null && (
        <div class="turn-input">
          <span class="muted">you:</span> <LongText text={t.input} id={`${sessionId}:${t.startSeq}:input`} class="inline-text" />
        </div>
      )}
      {t.calls.map((c, i) => (
        <div key={i} class="turn-call">
          <LongText text={c} id={`${sessionId}:${t.startSeq}:call:${i}`} class="turn-call-text" />
        </div>
      ))}
      {t.answers.map((a, i) => (
        <LongText key={i} text={a} id={`${sessionId}:${t.startSeq}:answer:${i}`} class="turn-answer" />
      ))}
      {t.error && (
        <div class="turn-error">
          error: <LongText text={t.error} id={`${sessionId}:${t.startSeq}:error`} class="inline-text" />
        </div>
      )}
    </div>
  );
}
