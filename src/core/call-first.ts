// A runner's batch keeps the rule forkline's own agent keeps by how it runs a
// step: a call is in the log before its tool runs (docs/runners.md "Why the
// call goes first"). Pure.
import { badInput } from './errors.ts';
import type { NewEvent } from './events.ts';

/**
 * Refuses (BAD_USER_INPUT, rule `call first`) a batch that holds a call's
 * tool/result together with the model/message making the call: the result
 * was had before the call was stored, so a fork cut or a crash while the tool
 * ran found no call in flight, and would run it again. A call refused without
 * running is no exception: the log cannot tell it from one that ran, so its
 * result goes in a later batch too. `firstSeq` is the seq the batch starts at;
 * read before the batch's codec check, so only what is there.
 */
export function checkCallFirst(events: readonly NewEvent[], firstSeq: number): void {
  const called = new Set<unknown>();
  for (const [i, e] of events.entries()) {
    const data = e.data as { toolCalls?: unknown; callId?: unknown } | null;
    if (e.type === 'model/message' && Array.isArray(data?.toolCalls)) {
      for (const call of data.toolCalls as Array<{ id?: unknown } | null>) called.add(call?.id);
    } else if (e.type === 'tool/result' && typeof data?.callId === 'string' && called.has(data.callId)) {
      throw badInput(
        `event ${firstSeq + i} (tool/result): the result of call ${data.callId} comes in the batch that makes the call: ` +
          'append the model/message with its calls first, then run the tools and append their results',
        { rule: 'call first', seq: firstSeq + i },
      );
    }
  }
}
