// A session's details type and the model text of the running step as it
// streams (sessionTurns TEXT_DELTA), for the session feed (session-feed.ts).
// No whole log is loaded anywhere: pages come from event-pages.ts.
import { SessionTurnsDocument, type DashboardSessionQuery } from '../../generated/graphql.ts';
import { follow, forkline } from './api.ts';

export type SessionDetails = NonNullable<DashboardSessionQuery['session']>;

export interface LiveStep {
  turn: number;
  step: number;
  text: string;
  /** Name of the tool running now, if any. */
  tool?: string;
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
  return follow(() => forkline.subscribe(SessionTurnsDocument, seen === undefined ? { sessionId: id } : { sessionId: id, afterSeq: seen }), {
    next: ({ sessionTurns: u }) => {
      if (seen !== undefined && u.seq != null) seen = Math.max(seen, u.seq);
      const step = u.step ?? 0;
      switch (u.kind) {
        case 'STEP_STARTED':
          setLive(() => ({ turn: u.turn, step, text: '' }));
          break;
        case 'TEXT_DELTA':
          if (answeredSteps.has(`${u.turn}:${step}`)) break;
          setLive((l) => (l && l.turn === u.turn && l.step === step ? { ...l, text: l.text + (u.text ?? '') } : { turn: u.turn, step, text: u.text ?? '' }));
          break;
        case 'TOOL_RUNNING':
          setLive((l) => ({ turn: u.turn, step, text: l?.text ?? '', tool: u.toolName ?? 'tool' }));
          break;
        case 'TOOL_FINISHED':
          setLive((l) => (l ? { ...l, tool: undefined } : l));
          break;
        case 'TURN_ENDED':
          setLive(() => null);
          onTurnBoundary();
          break;
        case 'TURN_STARTED':
          onTurnBoundary();
          break;
      }
    },
    error: onError,
  });
}
