// Under a session's title: its totals (Session.totals: turns, time in turns,
// tokens in and out, tool calls), a chart of the last turns' latency and
// tokens (inline SVG), and the workspace as of any event (Session.workspace(atSeq)).
// The chart and the workspace are read only when opened.
import { useEffect, useState } from 'preact/hooks';
import {
  DashboardRecentTurnsDocument,
  DashboardSessionTotalsDocument,
  DashboardWorkspaceDocument,
  type DashboardRecentTurnsQuery,
  type DashboardSessionTotalsQuery,
  type DashboardWorkspaceQuery,
} from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { formatDuration, formatUsd } from './format.ts';
import { errorText } from './widgets.tsx';
import { useConnectionProblem } from './connection-banner.tsx';

type Totals = NonNullable<DashboardSessionTotalsQuery['session']>['totals'];
type ChartTurn = NonNullable<DashboardRecentTurnsQuery['session']>['turns'][number];
type WorkspaceEntry = NonNullable<DashboardWorkspaceQuery['session']>['workspace'][number];

/** Turns the chart shows (the latest). */
export const CHART_TURNS = 40;
const n = (x: number) => (Number.isNaN(x) ? '…' : x.toLocaleString('en-US'));

/**
 * `changed` changes whenever the totals may have (a turn started or ended);
 * `onJump` moves both panes to a seq; `selectedSeq` is the event last jumped to.
 */
export function SessionInsights(props: {
  sessionId: string;
  changed: string;
  running: boolean;
  length: number;
  selectedSeq?: number;
  onJump(seq: number): void;
}) {
  const { sessionId, changed, running } = props;
  const [totals, setTotals] = useState<Totals | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  // While the server is away nothing is read (the last totals stay, said to be the last known); they are read
  // again as soon as requests get through, whatever failed meanwhile (a page left at "…" until the next turn ended).
  const unreachable = useConnectionProblem()?.kind === 'unreachable';
  useEffect(() => {
    // Read when the page opens and when a turn ends, not when one starts (on a huge log the sums take a while).
    if (unreachable || (running && totals && !failed)) return;
    let live = true;
    forkline.query(DashboardSessionTotalsDocument, { id: sessionId }).then(
      (r) => live && (r.session && setTotals(r.session.totals), setFailed(null)),
      (err) => live && setFailed(errorText(err)),
    );
    return () => {
      live = false;
    };
  }, [sessionId, changed, running, unreachable]);
  return (
    <div class="session-insights">
      <TotalsLine totals={totals} unavailable={unreachable ? 'the server is unreachable' : failed} />
      <TurnChart sessionId={sessionId} changed={changed} onJump={props.onJump} />
      <WorkspaceViewer sessionId={sessionId} length={props.length} selectedSeq={props.selectedSeq} onJump={props.onJump} />
    </div>
  );
}

/**
 * Shown at once with placeholders, so the panes below keep their place when the totals arrive. `unavailable`:
 * why they cannot be read now; the last ones read stay, marked as such, or the line says so instead of "…".
 */
function TotalsLine({ totals: t, unavailable }: { totals: Totals | null; unavailable: string | null }) {
  if (!t && unavailable)
    return (
      <p class="session-totals unavailable" data-testid="session-totals" data-state="unavailable">
        Totals not available: {unavailable}. They are read again when the server answers.
      </p>
    );
  const totals = t ?? { turns: NaN, endedTurns: NaN, steps: NaN, toolCalls: NaN, inputTokens: NaN, outputTokens: NaN, costUsd: null, turnMs: NaN };
  return (
    <dl
      class="session-totals"
      data-testid="session-totals"
      data-state={!t ? 'loading' : unavailable ? 'last-known' : 'current'}
      aria-label="Session totals"
      aria-busy={t ? undefined : true}
    >
      <div>
        <dt>Turns</dt>
        <dd>{n(totals.turns)}</dd>
      </div>
      <div>
        <dt>Time in turns</dt>
        <dd>{Number.isNaN(totals.turnMs) ? '…' : formatDuration(totals.turnMs)}</dd>
      </div>
      <div>
        <dt>Tokens in</dt>
        <dd>{n(totals.inputTokens)}</dd>
      </div>
      <div>
        <dt>Tokens out</dt>
        <dd>{n(totals.outputTokens)}</dd>
      </div>
      <div title='By the host&apos;s price table when each answer was written (docs/agents.md "Cost"); – when no model had a price'>
        <dt>Cost</dt>
        <dd data-testid="session-cost">{t ? formatUsd(totals.costUsd) : '…'}</dd>
      </div>
      <div>
        <dt>Tool calls</dt>
        <dd>{n(totals.toolCalls)}</dd>
      </div>
      <div>
        <dt>Steps</dt>
        <dd>{n(totals.steps)}</dd>
      </div>
      {t && unavailable && (
        <div class="totals-stale" data-testid="totals-stale">
          <dt>Last known</dt>
          <dd>not read again: {unavailable}</dd>
        </div>
      )}
    </dl>
  );
}

/** A <details> that reads its content only once opened, and again on `changed` while open. */
function useOpenedRead<T>(open: boolean, read: () => Promise<T>, deps: unknown[]): { value: T | null; error: string | null } {
  const [value, setValue] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!open) return;
    let live = true;
    read().then(
      (v) => live && (setValue(v), setError(null)),
      (err) => live && setError(errorText(err)),
    );
    return () => {
      live = false;
    };
  }, [open, ...deps]);
  return { value, error };
}

const W = 640;
const BAR_ROW = 54;

/** Latency and tokens per turn for the last CHART_TURNS turns: two rows of bars; a bar jumps to its turn. */
function TurnChart({ sessionId, changed, onJump }: { sessionId: string; changed: string; onJump(seq: number): void }) {
  const [open, setOpen] = useState(false);
  const { value: turns, error } = useOpenedRead(
    open,
    async () => (await forkline.query(DashboardRecentTurnsDocument, { id: sessionId, last: CHART_TURNS })).session?.turns ?? [],
    [sessionId, changed],
  );
  return (
    <details class="turn-chart" data-testid="turn-chart-details" onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Chart: latency and tokens of the last {CHART_TURNS} turns</summary>
      {error && <p class="error">{error}</p>}
      {turns && (turns.length ? <ChartSvg turns={turns} onJump={onJump} /> : <p class="muted">No turns yet.</p>)}
    </details>
  );
}

function ChartSvg({ turns, onJump }: { turns: readonly ChartTurn[]; onJump(seq: number): void }) {
  const slot = W / Math.max(turns.length, 1);
  const bar = Math.max(2, slot * 0.7);
  const maxMs = Math.max(1, ...turns.map((t) => t.durationMs ?? 0));
  const tokens = (t: ChartTurn) => (t.usage ? t.usage.inputTokens + t.usage.outputTokens : 0);
  const maxTokens = Math.max(1, ...turns.map(tokens));
  const h = (v: number, max: number) => Math.max(1, Math.round((v / max) * (BAR_ROW - 14)));
  const label = `Last ${turns.length} turns (turn ${turns[0].turn} to ${turns[turns.length - 1].turn}): longest ${formatDuration(maxMs)}, most tokens ${n(maxTokens)}`;
  return (
    <svg class="chart" viewBox={`0 0 ${W} ${BAR_ROW * 2 + 12}`} role="img" aria-label={label} data-testid="turn-chart">
      <text x="0" y="10" class="chart-label">
        latency (longest {formatDuration(maxMs)})
      </text>
      <text x="0" y={BAR_ROW + 22} class="chart-label">
        tokens in + out (most {n(maxTokens)})
      </text>
      {turns.map((t, i) => {
        const x = i * slot + (slot - bar) / 2;
        const ms = t.durationMs ?? 0;
        const calls = t.toolCallCount; // counted over the whole turn (its steps would list a long turn's first only)
        const tip = `turn ${t.turn} (${t.reason ?? 'running'}): ${t.durationMs == null ? 'running' : formatDuration(ms)}, ${t.usage ? `${n(t.usage.inputTokens)} in · ${n(t.usage.outputTokens)} out tokens` : 'no tokens reported'}, ${n(calls)} tool call${calls === 1 ? '' : 's'}`;
        const lat = h(ms, maxMs);
        const tok = h(tokens(t), maxTokens);
        const inTok = t.usage ? Math.round((t.usage.inputTokens / Math.max(1, tokens(t))) * tok) : 0;
        return (
          <g key={t.turn} class={`chart-turn reason-${t.reason ?? 'open'}`} data-turn={t.turn} onClick={() => onJump(t.endSeq ?? t.startSeq)}>
            <title>{tip}</title>
            <rect class="chart-hit" x={i * slot} y={0} width={slot} height={BAR_ROW * 2 + 12} />
            <rect class="bar-latency" x={x} y={BAR_ROW - lat} width={bar} height={lat} />
            <rect class="bar-tokens-in" x={x} y={BAR_ROW * 2 + 10 - tok} width={bar} height={inTok} />
            <rect class="bar-tokens-out" x={x} y={BAR_ROW * 2 + 10 - tok + inTok} width={bar} height={tok - inTok} />
          </g>
        );
      })}
    </svg>
  );
}

/** The workspace as of an event: the latest by default, or the event last jumped to, or any seq typed in. */
function WorkspaceViewer(props: { sessionId: string; length: number; selectedSeq?: number; onJump(seq: number): void }) {
  const [open, setOpen] = useState(false);
  const [draft, setDraft] = useState('');
  const [atSeq, setAtSeq] = useState<number | null>(null); // null: the latest event
  useEffect(() => {
    if (props.selectedSeq !== undefined && props.selectedSeq >= 0) setAtSeq(props.selectedSeq);
  }, [props.selectedSeq]);
  const latest = atSeq === null;
  const { value: entries, error } = useOpenedRead<readonly WorkspaceEntry[]>(
    open,
    async () => (await forkline.query(DashboardWorkspaceDocument, { id: props.sessionId, atSeq })).session?.workspace ?? [],
    [props.sessionId, atSeq, latest ? props.length : 0],
  );
  return (
    <details class="workspace-viewer" onToggle={(e) => setOpen(e.currentTarget.open)} data-testid="workspace-viewer">
      <summary>Workspace {latest ? 'now' : `at event #${atSeq}`}</summary>
      <form
        class="workspace-at"
        onSubmit={(e) => {
          e.preventDefault();
          const seq = Number(draft);
          if (draft.trim() && Number.isInteger(seq) && seq >= 0) setAtSeq(Math.min(seq, props.length - 1));
        }}
      >
        <label>
          at event{' '}
          <input
            type="number"
            min={0}
            max={Math.max(0, props.length - 1)}
            value={draft}
            onInput={(e) => setDraft(e.currentTarget.value)}
            aria-label="Workspace at seq"
          />
        </label>
        <button type="submit" class="small" disabled={!draft.trim()}>
          Show
        </button>
        <button type="button" class="small" disabled={latest} onClick={() => setAtSeq(null)}>
          Latest
        </button>
      </form>
      {error && <p class="error">{error}</p>}
      {entries &&
        (entries.length ? (
          <div class="tools-scroll" tabIndex={0} role="region" aria-label="Workspace, scrollable">
            <table class="tools-table workspace-table">
              <thead>
                <tr>
                  <th>key</th>
                  <th>value</th>
                  <th>written at</th>
                </tr>
              </thead>
              <tbody>
                {entries.map((w) => (
                  <tr key={w.key} data-key={w.key}>
                    <td>
                      <code>{w.key}</code>
                    </td>
                    <td class="workspace-value">{w.value}</td>
                    <td>
                      <button type="button" class="link seq" onClick={() => props.onJump(w.seq)} aria-label={`Jump to the write of ${w.key} at event ${w.seq}`}>
                        #{w.seq}
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <p class="muted">Empty {latest ? 'now' : `at event #${atSeq}`}: no note was written before it.</p>
        ))}
    </details>
  );
}
