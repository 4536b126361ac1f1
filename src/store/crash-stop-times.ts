// When a turn or step that crash repair closed really stopped. Repair's
// closers (synthetic results, step/end and turn/end `interrupted`,
// docs/contract.md#repair) are written when the session is recovered — a
// restart, or an import of a crashed recording — which may be hours after
// the crash: timed by them, a turn would last until its recovery. Its end in
// time is the last event before the closers, the last one the stopped
// process wrote. One read of the few events before each closer.
import type { LogRef, SessionLog } from './session-log.ts';

interface Bracket {
  reason: string | null;
  endSeq: number | null;
  endedAt?: Date;
}

/** Repair closes at most a step's calls, its step and its turn: the events looked back over for the last one written before them. */
const MAX_CLOSERS_LOOKED_AT = 256;

/** `brackets` with each one crash repair closed ending at the last event before its closers (in place; returned for chaining). */
export async function endInterruptedAtCrash<T extends Bracket>(log: Pick<SessionLog, 'range'>, ref: LogRef, brackets: T[]): Promise<T[]> {
  await Promise.all(
    brackets.map(async (b) => {
      if (b.reason !== 'interrupted' || b.endSeq === null) return;
      const at = await stoppedBefore(log, ref, b.endSeq);
      if (at) b.endedAt = at;
    }),
  );
  return brackets;
}

/**
 * When the events a repair closed stopped: the time of the last event before
 * the synthetic run that ends at `closerSeq`; undefined when the closer is not
 * synthetic (an end written as it stopped is timed right already).
 */
async function stoppedBefore(log: Pick<SessionLog, 'range'>, ref: LogRef, closerSeq: number): Promise<Date | undefined> {
  const events = await log.range(ref, Math.max(0, closerSeq - MAX_CLOSERS_LOOKED_AT), closerSeq);
  if (events.at(-1)?.seq !== closerSeq || !events.at(-1)!.synthetic) return undefined;
  for (let i = events.length - 2; i >= 0; i--) if (!events[i].synthetic) return events[i].createdAt;
  return undefined;
}
