// Markers where a session's children were forked: a row in the conversation
// (the children named, with links, and the view of them side by side) and a
// link on the event's timeline row, from the session's fork points.
import { useEffect, useState } from 'preact/hooks';
import { DashboardForkPointsDocument } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { NO_FORK_POINTS, type ForkPointItem, type ForkPoints } from './fork-points.ts';
import type { RowProps } from './conversation-view.tsx';
import { forkPointPath, sessionPath } from './router.ts';
import './fork-family.css';
import { visibleText } from '../../../src/core/visible-text.ts';

/**
 * The session's fork points, read again when `childrenKey` (its children as the page knows them) changes; null
 * while the page has not read the session: a read then was made again as soon as its children were known.
 */
export function useForkPoints(id: string, childrenKey: string | null): ForkPoints {
  const [points, setPoints] = useState<ForkPoints>(NO_FORK_POINTS);
  useEffect(() => {
    if (childrenKey === null) return;
    let closed = false;
    forkline
      .query(DashboardForkPointsDocument, { id })
      .then((r) => !closed && setPoints(new Map(r.session?.forkPoints.map((p) => [p.seq, p.childCount]) ?? [])))
      .catch(() => {}); // markers are extra: the page works without them, the next change retries
    return () => {
      closed = true;
    };
  }, [id, childrenKey]);
  return points;
}

export interface KnownChild {
  id: string;
  title?: string | null;
  forkedAtSeq?: number | null;
}

/** Children named inline at most; the rest are in the side-by-side view. */
const NAMED = 4;

/** A fork drawn, not a character: no default font lacks it (⑂ is an empty box with Debian's). */
function ForkGlyph() {
  return (
    <svg class="fork-glyph" viewBox="0 0 16 16" width="12" height="12" aria-hidden="true" focusable="false">
      <path d="M5 2v12M5 9c0-3 6-2 6-6M11 2v1" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" />
    </svg>
  );
}

const forks = (n: number) => `${n} ${n === 1 ? 'fork' : 'forks'}`;

export function ForkPointRow({ item, sessionId, known, row }: { item: ForkPointItem; sessionId: string; known: readonly KnownChild[]; row?: RowProps }) {
  const here = known.filter((c) => c.forkedAtSeq === item.seq);
  return (
    <li {...row} class="fork-point-row" data-seq={item.seq} data-testid="fork-point">
      <span class="fork-point-head">
        <ForkGlyph /> {forks(item.childCount)} at #{item.seq}:
      </span>{' '}
      {here.slice(0, NAMED).map((c, i) => (
        <span key={c.id}>
          {i > 0 && ', '}
          <a href={sessionPath(c.id)}>{visibleText(c.title || c.id)}</a>
        </span>
      ))}
      {here.length > NAMED && `, +${item.childCount - NAMED} more`}
      {' · '}
      <a href={forkPointPath(sessionId, item.seq)} class="fork-point-link">
        {item.childCount > 1 ? 'side by side' : 'latest answer'}
      </a>
    </li>
  );
}

/** On the timeline row of event `seq`: how many children were forked there, linking to them. */
export function TimelineForkLink({ sessionId, seq, count }: { sessionId: string; seq: number; count: number }) {
  return (
    <a
      class="timeline-forks"
      href={forkPointPath(sessionId, seq)}
      data-testid="timeline-forks"
      tabIndex={-1} /* one tab stop per timeline row: the arrow keys reach it (row-keys.ts) */
      title={`The ${forks(count)} made at event ${seq}, side by side`}
    >
      <ForkGlyph /> {forks(count)}
    </a>
  );
}
