// Taking up a step after a person's decision (docs/runners.md, Tool approval;
// docs/contract.md#tool-approval): the step's message is stored and some of
// its calls have no result yet (ModelRequest.openCalls). Each is settled in
// call order from the log alone, so any runner that claims the session —
// the one that asked, or another after a restart — does the same: an
// approved call runs once (after plugin/agent/approved-call-start is
// stored), a denied one gets a result saying it did not run and why, a call
// not asked yet is asked when it needs a decision (the turn waits again) and
// run when it does not. Then the step ends, and the turn goes on.
import type { ModelRequest, RunnerSession, RunnerToolCall, TurnWriter } from './runner.ts';
import type { ToolResultContent } from './tool-output.ts';

export type OpenCall = ModelRequest['openCalls'][number];

export interface SettleOpenCalls {
  /** Runs the call's tool (approved, or needing no decision) and gives its result; a tool that throws is an `error` result. */
  run: (call: RunnerToolCall) => Promise<ToolResultContent>;
  /** Whether a call not asked yet needs a person's decision before it runs. */
  needsApproval: (call: RunnerToolCall) => Promise<boolean>;
}

/** The model-visible result of a denied call: it did not run, and why (the wording forkline's own agent stores). */
export function deniedContent(call: { id: string; name: string }, reason: string | null | undefined): string {
  return `Tool call "${call.name}" (${call.id}) was denied${reason ? `: ${reason}` : ''}. It did not run.`;
}

/**
 * Whether the session's own choice (ModelRequest.approvalRequired: names,
 * `<server>__*`, `*`) makes a call of `tool` wait for a person's decision
 * (docs/contract.md#tool-approval), besides what the runner's tool says.
 */
export function sessionRequiresApproval(request: Pick<ModelRequest, 'approvalRequired'>, tool: string): boolean {
  return request.approvalRequired.some((entry) => entry === '*' || entry === tool || (entry.endsWith('__*') && tool.startsWith(entry.slice(0, -1))));
}

/**
 * Settles the open step `turn` took up (its request's openCalls): `waiting`
 * when a call is asked for (or still awaits) a decision — the lease is given
 * back with the request; `settled` when every call has its result and the
 * step's end is stored (read the next request: the turn's next step).
 */
export async function settleOpenCalls(turn: TurnWriter, calls: readonly OpenCall[], how: SettleOpenCalls): Promise<'waiting' | 'settled'> {
  for (const open of calls) {
    const call = { id: open.id, name: open.name, arguments: open.arguments };
    switch (open.approval) {
      case 'pending':
        return 'waiting'; // still awaiting a person (a claim of a WAITING session): nothing runs
      case 'denied':
        await turn.result(call, 'error', deniedContent(call, open.reason));
        break;
      case 'approved': {
        await turn.approvedCallStart(call);
        turn.session.assertHeld(); // the check at the act: a lease run out meanwhile runs nothing
        const outcome = await how.run(call);
        await turn.result(call, outcome.status, outcome.content);
        break;
      }
      default: {
        // Asked when reached, as forkline's agent asks: the calls after it wait their turn.
        if (await how.needsApproval(call)) {
          await turn.requestApproval([call]);
          return 'waiting';
        }
        turn.session.assertHeld();
        const outcome = await how.run(call);
        await turn.result(call, outcome.status, outcome.content);
      }
    }
  }
  turn.endStep();
  await turn.flush();
  return 'settled';
}

/**
 * Takes up the step a person decided on when `request` has one (an open step
 * whose calls lack results): settles it, then reads the turn's next request.
 * Undefined when the turn waits again or has nothing left to do; else the
 * request and writer the adapter goes on with (unchanged without such a step).
 */
export async function resumeDecidedStep(
  session: RunnerSession,
  turn: TurnWriter,
  request: ModelRequest,
  how: SettleOpenCalls,
): Promise<{ request: ModelRequest; turn: TurnWriter } | undefined> {
  if (!request.stepOpen || request.openCalls.length === 0) return { request, turn };
  if ((await settleOpenCalls(turn, request.openCalls, how)) === 'waiting') return undefined;
  const next = await session.modelRequest();
  if (next.turn == null || next.step == null) return undefined;
  return { request: next, turn: session.turn(next) };
}
