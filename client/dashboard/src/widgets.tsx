// Small shared pieces of the dashboard's UI.
import type { ComponentChildren } from 'preact';
import { badHash } from './router.ts';
import { problemOf } from './api.ts';

export function errorText(err: unknown): string {
  const problem = problemOf(err);
  if (problem?.kind === 'unreachable') return 'The dashboard cannot reach the server; trying again as soon as it answers.';
  if (problem?.kind === 'token-rejected') return 'Token rejected: enter another API token.';
  if (problem?.kind === 'rate-limited') return `The server asked us to wait (${problem.message}).`;
  if (err instanceof Error) return err.message;
  if (Array.isArray(err)) return err.map(errorText).join('; ');
  if (err && typeof err === 'object' && 'message' in err) return String((err as { message: unknown }).message);
  if (err && typeof err === 'object' && 'reason' in err) return `connection closed: ${String((err as { reason: unknown }).reason) || 'no reason'}`;
  return String(err);
}

/** `failed`: its last turn failed (Session.lastTurnFailed): shown failed, not idle, unless a turn is running. */
export function StatusBadge({ status, failed }: { status: string; failed?: boolean }) {
  // A waiting session's turn is open (a call awaits approval): not failed whatever its last turn did.
  const shown = status === 'RUNNING' ? 'running' : status === 'WAITING' ? 'waiting' : failed ? 'failed' : status === 'IDLE' ? 'idle' : status.toLowerCase();
  return <span class={`badge status-${shown}`}>{shown}</span>;
}

/** Marks inherited, synthetic or reason labels; `tone` picks the colour. */
export function Badge(props: { tone: string; title?: string; children: ComponentChildren }) {
  return (
    <span class={`badge ${props.tone}`} title={props.title}>
      {props.children}
    </span>
  );
}

/** What each effect means for a fork or crash that cuts a call off (docs/mcp.md). */
const EFFECT_TITLES: Record<string, string> = {
  'read-only': 'Read-only: a call cut off by a fork or crash is safe to repeat',
  idempotent: 'Idempotent: repeating a cut-off call changes nothing more',
  'side-effects': 'Side effects: a cut-off call may already have changed the world; check before repeating it',
};

/** A tool's effect, as the log spells it (`read-only`) or GraphQL does (`READ_ONLY`). */
export function EffectBadge({ effect }: { effect: string }) {
  const name = effect.toLowerCase().replace(/_/g, '-');
  return (
    <Badge tone={`effect effect-${name}`} title={EFFECT_TITLES[name]}>
      {name}
    </Badge>
  );
}

/** Says so when the address's hash is one of the dashboard's forms but malformed (router.ts badHash), instead of showing something else silently. */
export function BadLinkNotice() {
  const bad = badHash(location.hash);
  return bad ? (
    <p class="error" role="alert" data-testid="bad-link">
      This link is not valid: {bad}.
    </p>
  ) : null;
}
