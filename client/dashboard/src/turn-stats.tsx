// A turn's duration and token usage under its end, with a bar per step
// (latency), from Session.turnAt. Asked only for turn ends on screen (the
// conversation is windowed) and kept per turn, so scrolling back is free.
import { useEffect, useState } from 'preact/hooks';
import { DashboardTurnStatsDocument, type DashboardTurnStatsQuery } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { formatDuration, formatUsd } from './format.ts';
import { useConnectionProblem } from './connection-banner.tsx';

type TurnStats = NonNullable<NonNullable<DashboardTurnStatsQuery['session']>['turnAt']>;

/** Ended turns never change: one request per (session, turn end) for the page's life. */
const cache = new Map<string, Promise<TurnStats | null>>();

const statsOf = (sessionId: string, endSeq: number) => {
  const key = `${sessionId}@${endSeq}`;
  let p = cache.get(key);
  if (!p) {
    p = forkline.query(DashboardTurnStatsDocument, { id: sessionId, seq: endSeq }).then((r) => r.session?.turnAt ?? null);
    p.catch(() => cache.delete(key)); // a failed read is retried next time the row shows
    cache.set(key, p);
  }
  return p;
};

const n = (x: number) => x.toLocaleString('en-US');
/**
 * Step bars drawn at most per turn: a turn of 50,000 steps drew 3,333 (and named them all in its label). The query asks
 * for as many (`steps(first: 50)`, client/operations/dashboard.graphql): a long turn's other steps are not read.
 */
const MAX_BARS = 50;
/** How long a turn end stays mounted before its figures are asked for. */
const ASK_AFTER_MS = 150;

export function TurnStatsLine({ sessionId, endSeq }: { sessionId: string; endSeq: number }) {
  const [stats, setStats] = useState<TurnStats | null>(null);
  // A read that failed while the server was away is made again when it answers (not only when the row remounts).
  const unreachable = useConnectionProblem()?.kind === 'unreachable';
  useEffect(() => {
    if (unreachable && !stats) return;
    let live = true;
    const show = () =>
      statsOf(sessionId, endSeq).then(
        (s) => live && setStats(s),
        () => {},
      );
    // Asked only for a turn end that stays on screen a moment: one scrolled past is not worth a request
    // (a fast scroll through the conversation would send one per turn, each answer growing its row).
    const wait = cache.has(`${sessionId}@${endSeq}`) ? undefined : setTimeout(show, ASK_AFTER_MS);
    if (!wait) void show();
    return () => {
      live = false;
      clearTimeout(wait);
    };
  }, [sessionId, endSeq, unreachable]);
  if (!stats) return null;
  // Counted by the server whatever the turn's length; a turn of thousands of steps draws its first MAX_BARS.
  const bars = stats.steps.slice(0, MAX_BARS);
  const longest = Math.max(1, ...bars.map((s) => s.durationMs ?? 0));
  const { stepCount: steps, toolCallCount: calls } = stats;
  const summary = [
    stats.durationMs != null && formatDuration(stats.durationMs),
    `${n(steps)} step${steps === 1 ? '' : 's'}`,
    `${n(calls)} tool call${calls === 1 ? '' : 's'}`,
    stats.usage && `${n(stats.usage.inputTokens)} in · ${n(stats.usage.outputTokens)} out tokens`,
    stats.usage?.costUsd != null && formatUsd(stats.usage.costUsd),
  ].filter(Boolean);
  return (
    <div class="turn-stats" data-testid="turn-stats">
      <span class="muted">{summary.join(' · ')}</span>
      <span
        class="step-bars"
        role="img"
        aria-label={`Turn ${stats.turn} step latencies${bars.length < steps ? ` (its first ${bars.length} steps of ${n(steps)})` : ''}: ${bars.map((s) => `step ${s.step} ${s.durationMs == null ? 'open' : formatDuration(s.durationMs)}`).join(', ')}`}
      >
        {bars.map((s) => (
          <span
            key={s.step}
            class={`step-bar reason-${s.reason ?? 'open'}`}
            style={{ width: `${Math.max(4, Math.round(((s.durationMs ?? 0) / longest) * 80))}px` }}
            title={`step ${s.step}: ${s.durationMs == null ? 'open' : formatDuration(s.durationMs)}, ${s.toolCallCount} tool call${s.toolCallCount === 1 ? '' : 's'}${s.usage ? `, ${n(s.usage.inputTokens)} → ${n(s.usage.outputTokens)} tokens` : ''}`}
          />
        ))}
      </span>
    </div>
  );
}
