// When a turn or step that a fork closed really stopped. A fork's closers
// (step/end and turn/end `forked`) are written when the fork is made, which
// may be long after the cut: timed by them, a 46 ms turn cut mid-way would
// last until the fork was made. Its end in time is the cut, the last event
// before the fork's marker (session/end-seed): two index probes per marker.
import type { LogRef, SessionLog } from './session-log.ts';

interface Bracket {
  reason: string | null;
  endSeq: number | null;
  endedAt?: Date;
}

/** `brackets` with each one a fork closed ending when its log was cut (in place; returned for chaining). */
export async function endForkedAtCut<T extends Bracket>(log: Pick<SessionLog, 'lastOfType' | 'event'>, ref: LogRef, brackets: T[]): Promise<T[]> {
  const cutTimes = new Map<number, Promise<Date | undefined>>();
  const cutTimeBefore = (seq: number) => {
    let t = cutTimes.get(seq);
    if (!t) {
      t = log
        .lastOfType(ref, 'session/end-seed', seq)
        .then(async (marker) => (marker && marker.seq > 0 ? (await log.event(ref, marker.seq - 1))?.createdAt : undefined));
      cutTimes.set(seq, t);
    }
    return t;
  };
  await Promise.all(
    brackets.map(async (b) => {
      if (b.reason !== 'forked' || b.endSeq === null) return;
      const at = await cutTimeBefore(b.endSeq);
      if (at) b.endedAt = at;
    }),
  );
  return brackets;
}
