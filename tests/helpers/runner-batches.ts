// A log spec batch as an external runner writes it (tests/spec/log-spec.ts):
// inbox/add is the service's to write (sendMessage), never a runner's, so a
// batch goes out in runs — inputs through the service, the rest through
// appendEvents — each conditional on the log's length the run before left.
import type { NewEvent } from '../../src/core/events.ts';
import type { Refusal } from '../spec/log-spec.ts';

type Writer = (events: NewEvent[], expectedEventCount: number) => Promise<Refusal | undefined>;

export async function appendInRuns(events: NewEvent[], expectedEventCount: number, write: { inputs: Writer; runner: Writer }): Promise<Refusal | undefined> {
  let expected = expectedEventCount;
  for (let i = 0; i < events.length;) {
    const service = events[i].type === 'inbox/add';
    let j = i;
    while (j < events.length && (events[j].type === 'inbox/add') === service) j++;
    const run = events.slice(i, j);
    const refused = await (service ? write.inputs : write.runner)(run, expected);
    if (refused) return refused;
    expected += run.length;
    i = j;
  }
  return undefined;
}

/** A refusal as the log spec compares them: the first error's code, and the rule and seq it names. */
export function refusalOf(errors: ReadonlyArray<{ extensions?: Record<string, unknown> }>): Refusal {
  const { code, rule, seq } = (errors[0].extensions ?? {}) as { code: string; rule?: string; seq?: number };
  return { code, ...(rule === undefined ? {} : { rule, seq }) };
}
