// A turn stopped by a time limit or a user's cancel (docs/contract.md#agent-loop): forkline's own agent's
// turn limit (FORKLINE_MAX_TURN_MS) and an external runner's step limit (FORKLINE_RUNNER_MAX_STEP_MS) end it
// alike, and so does a cancelTurn, whoever runs the turn: clients and the model read one outcome.
import type { NewEvent } from './events.ts';
import type { OpenTail } from './log-state.ts';

/** The error a turn stopped by a time limit carries: which limit, and how long it is. */
export const timeLimitMessage = (what: 'turn' | 'step', limitMs: number) => `the ${what} ran longer than its limit of ${limitMs} ms and was stopped`;

/**
 * What ends a turn a time limit stopped: the open step's end (`interrupted`:
 * its calls without a result are left so, as a cancel leaves them), then the
 * turn's plugin/agent/error with `message`, then its end (`failed`, as the
 * failures the service decides end; `cancelled` is a user's cancelTurn).
 * `lastStep`: the turn's last step, named by the error when no step is open.
 */
export function timeLimitClosers(open: OpenTail, lastStep: number, message: string): NewEvent[] {
  const { turn } = open;
  const step = open.step?.step ?? lastStep;
  return [
    ...(open.step ? [{ type: 'step/end', data: { turn, step, reason: 'interrupted' } }] : []),
    { type: 'plugin/agent/error', data: { turn, step, message } },
    { type: 'turn/end', data: { turn, reason: 'failed' } },
  ];
}

/**
 * What ends a turn a user cancelled (cancelTurn), after what of it is kept: the open step's end
 * (`interrupted`, its calls without a result left so), then the turn's end (`cancelled`).
 */
export function cancelClosers(open: OpenTail): NewEvent[] {
  const { turn } = open;
  return [
    ...(open.step ? [{ type: 'step/end', data: { turn, step: open.step.step, reason: 'interrupted' } }] : []),
    { type: 'turn/end', data: { turn, reason: 'cancelled' } },
  ];
}
