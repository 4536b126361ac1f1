// A session's details type and the model text of the running step as it
// streams (sessionTurns TEXT_DELTA), for the session feed (session-feed.ts).
// No whole log is loaded anywhere: pages come from event-pages.ts.
import { SessionTurnsDocument, SessionsTurnsDocument, type DashboardSessionQuery, type SessionTurnsSubscription } from '../../generated/graphql.ts';
import { follow, forkline } from './api.ts';

export type SessionDetails = NonNullable<DashboardSessionQuery['session']>;

export interface LiveStep {
  turn: number;
  step: number;
  text: string;
  /** Name of the tool running now, if any. */
  tool?: string;
}

type LiveUpdate = Pick<SessionTurnsSubscription['sessionTurns'], 'kind' | 'turn' | 'step' | 'text' | 'toolName'>;

/**
 * A subscription's steps whose text it has begun to give. A subscription gives each answer's text whole
 * (docs/api.md "Live turns"): its deltas from the first, or, for one already streaming when it began, the stored
 * text at once. So a step's first text in a subscription starts it over: after a resubscription (the server
 * restarted mid-answer) it was appended to what had streamed before, and the card showed the text twice.
 */
function stepTexts() {
  const begun = new Set<string>();
  /** Whether `u` is the first text of its step (of its session) in this subscription. */
  return (u: LiveUpdate & { sessionId?: string }) => {
    if (u.kind !== 'TEXT_DELTA') return false;
    const key = `${u.sessionId ?? ''}:${u.turn}:${u.step ?? 0}`;
    if (begun.has(key)) return false;
    begun.add(key);
    return true;
  };
}

/**
 * What a turn update does to the running step's live text (undefined: nothing), and whether it is a turn's
 * boundary (the log has a turn more to show). Deltas of a step in `answeredSteps` are dropped: the log shows it.
 * `begins`: the step's first text in this subscription, which replaces what the step showed (stepTexts).
 */
function liveStepChange(
  u: LiveUpdate,
  answeredSteps: ReadonlySet<string>,
  begins: boolean,
): { change?: (l: LiveStep | null) => LiveStep | null; boundary: boolean } {
  const step = u.step ?? 0;
  switch (u.kind) {
    case 'STEP_STARTED':
      return { change: () => ({ turn: u.turn, step, text: '' }), boundary: false };
    case 'TEXT_DELTA':
      if (answeredSteps.has(`${u.turn}:${step}`)) return { boundary: false };
      return {
        change: (l) =>
          l && l.turn === u.turn && l.step === step ? { ...l, text: (begins ? '' : l.text) + (u.text ?? '') } : { turn: u.turn, step, text: u.text ?? '' },
        boundary: false,
      };
    case 'TOOL_RUNNING':
      return { change: (l) => ({ turn: u.turn, step, text: l?.text ?? '', tool: u.toolName ?? 'tool' }), boundary: false };
    case 'TOOL_FINISHED':
      return { change: (l) => (l ? { ...l, tool: undefined } : l), boundary: false };
    case 'TURN_ENDED':
      return { change: () => null, boundary: true };
    case 'TURN_STARTED':
      return { boundary: true };
    default:
      return { boundary: false };
  }
}

/**
 * The running step's streamed text and tool (sessionTurns), until its
 * model/message is stored (then `answeredSteps` holds it and the log shows it).
 * `afterSeq`: the turns after that seq are replayed from the log first, and a
 * resubscription goes on from the last stored event seen (docs/api.md "Live
 * turns"), so nothing between a read of the session and the subscription is missed.
 */
export function followLiveSteps(
  id: string,
  answeredSteps: Set<string>,
  setLive: (update: (l: LiveStep | null) => LiveStep | null) => void,
  onTurnBoundary: () => void,
  onError: (err: unknown) => void,
  afterSeq?: number,
): () => void {
  let seen = afterSeq;
  let begins = stepTexts();
  const open = () => {
    begins = stepTexts();
    return forkline.subscribe(SessionTurnsDocument, seen === undefined ? { sessionId: id } : { sessionId: id, afterSeq: seen });
  };
  return follow(open, {
    next: ({ sessionTurns: u }) => {
      if (seen !== undefined && u.seq != null) seen = Math.max(seen, u.seq);
      const { change, boundary } = liveStepChange(u, answeredSteps, begins(u));
      if (change) setLive(change);
      if (boundary) onTurnBoundary();
    },
    error: onError,
  });
}

/**
 * The running steps of several sessions (a fan-out's variants) with one subscription (sessionsTurns), not one
 * each: a page of 50 cards took 50 of the token's places, and five such pages its 250 (docs/operations.md
 * "Connections"). `seen` holds each session's seq to replay after, and is kept current, so a resubscription (a
 * lost connection, or the caller's next set of ids) goes on from the last stored event seen of each.
 */
export function followSessionsLiveSteps(
  ids: readonly string[],
  seen: Map<string, number>,
  setLive: (sessionId: string, update: (l: LiveStep | null) => LiveStep | null) => void,
): () => void {
  let begins = stepTexts();
  const open = () => {
    begins = stepTexts();
    return forkline.subscribe(SessionsTurnsDocument, { sessions: ids.map((sessionId) => ({ sessionId, afterSeq: seen.get(sessionId) })) });
  };
  return follow(open, {
    next: ({ sessionsTurns: u }) => {
      if (u.seq != null) seen.set(u.sessionId, Math.max(seen.get(u.sessionId) ?? -1, u.seq));
      const { change } = liveStepChange(u, NO_STEPS, begins(u));
      if (change) setLive(u.sessionId, change);
    },
  });
}

const NO_STEPS: ReadonlySet<string> = new Set();
