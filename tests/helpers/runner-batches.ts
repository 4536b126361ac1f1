// A log spec batch as an external runner writes it (tests/spec/log-spec.ts):
// inbox/add is the service's to write (sendMessage), never a runner's, so a
// batch goes out in runs — inputs through the service, the rest through
// appendEvents — each conditional on the log's length the run before left.
// A runner's run is cut after each model/message that makes calls: the call
// is in the log before its result (docs/runners.md "Why the call goes first").
import type { NewEvent } from '../../src/core/events.ts';
import type { Refusal } from '../spec/log-spec.ts';

type Writer = (events: NewEvent[], expectedEventCount: number) => Promise<Refusal | undefined>;

export async function appendInRuns(events: NewEvent[], expectedEventCount: number, write: { inputs: Writer; runner: Writer }): Promise<Refusal | undefined> {
  let expected = expectedEventCount;
  for (let i = 0; i < events.length;) {
    const service = events[i].type === 'inbox/add';
    let j = i;
    while (j < events.length && (events[j].type === 'inbox/add') === service) j++;
    for (const run of service ? [events.slice(i, j)] : callFirstBatches(events.slice(i, j))) {
      const refused = await (service ? write.inputs : write.runner)(run, expected);
      if (refused) return refused;
      expected += run.length;
    }
    i = j;
  }
  return undefined;
}

/** A model/message that makes calls (a non-empty toolCalls array, whatever its items). */
export function makesCalls(e: { type: string; data: unknown }): boolean {
  const calls = (e.data as { toolCalls?: unknown } | null)?.toolCalls;
  return e.type === 'model/message' && Array.isArray(calls) && calls.length > 0;
}

/**
 * A runner's batch as the appends it goes in: one ends after each
 * model/message that makes calls, so no call's result shares its call's
 * append (rule `call first`, docs/runners.md "Why the call goes first").
 */
export function callFirstBatches<E extends { type: string; data: unknown }>(events: readonly E[]): E[][] {
  const batches: E[][] = [];
  let batch: E[] = [];
  for (const e of events) {
    batch.push(e);
    if (makesCalls(e)) {
      batches.push(batch);
      batch = [];
    }
  }
  if (batch.length || batches.length === 0) batches.push(batch);
  return batches;
}

/** A refusal as the log spec compares them: the first error's code, and the rule and seq it names. */
export function refusalOf(errors: ReadonlyArray<{ extensions?: Record<string, unknown> }>): Refusal {
  const { code, rule, seq } = (errors[0].extensions ?? {}) as { code: string; rule?: string; seq?: number };
  return { code, ...(rule === undefined ? {} : { rule, seq }) };
}
