// fork: fork a session of N events at its last event through SessionStore.fork,
// against a raw INSERT … SELECT of the same rows (goal: ratio <= 1.5, RSS < 50 MB).
import { EVENT_ID_SQL } from '../src/store/ids.ts';
import { QUICK, round, rssMB, type BenchContext } from './context.ts';

export async function benchFork({ store, db }: BenchContext) {
  const events = QUICK ? 10_000 : 100_000;
  const scope = { tenant: 'bench' };
  const parent = await store.createSession(scope, { title: 'fork bench' });
  // A long log of completed turns, written in bulk, ending inside an open step
  // with an unanswered call so the fork also writes closers.
  const turnEvents: Array<{ type: string; data: unknown }> = [];
  let turn = 0;
  while (1 + turnEvents.length < events - 8) {
    turn++;
    const inputId = `in_${turn}`;
    turnEvents.push(
      { type: 'inbox/add', data: { inputId, text: `question ${turn}` } },
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn, inputId } },
      { type: 'step/start', data: { turn, step: 1 } },
      { type: 'model/message', data: { turn, step: 1, text: `answer ${turn} `.repeat(8), toolCalls: [] } },
      { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn, reason: 'completed' } },
    );
  }
  turn++;
  turnEvents.push(
    { type: 'inbox/add', data: { inputId: 'in_last', text: 'last' } },
    { type: 'inbox/remove', data: { inputId: 'in_last', reason: 'taken' } },
    { type: 'turn/start', data: { turn, inputId: 'in_last' } },
    { type: 'step/start', data: { turn, step: 1 } },
    { type: 'model/message', data: { turn, step: 1, text: '', toolCalls: [{ id: 'call_1', name: 'note_write', arguments: '{}' }] } },
  );
  for (let i = 0; i < turnEvents.length; i += 5000) await store.append(parent.id, turnEvents.slice(i, i + 5000));
  const { eventCount } = await store.requireSession(scope, parent.id);
  await db.pool.query('VACUUM ANALYZE "Event"');

  // Alternate fork and raw copy (raw first, so neither gets a warmer cache) and
  // keep the best of each: the machine may be busy with other work.
  const forkMs: number[] = [];
  const rawMs: number[] = [];
  let rssGrowthMB = 0;
  let closers = 0;
  for (let rep = 0; rep < 2; rep++) {
    const rawTarget = await store.createSession(scope, {});
    let t = performance.now();
    await db.pool.query(
      `INSERT INTO "Event" (id, "sessionId", seq, type, data, inherited, synthetic, "createdAt")
       SELECT ${EVENT_ID_SQL}, $1, seq, type, data, true, synthetic, "createdAt" FROM "Event" WHERE "sessionId" = $2 AND seq <= $3`,
      [rawTarget.id, parent.id, eventCount - 1],
    );
    rawMs.push(performance.now() - t);

    const rssBefore = rssMB();
    t = performance.now();
    const fork = await store.fork(scope, parent.id, eventCount - 1);
    forkMs.push(performance.now() - t);
    rssGrowthMB = Math.max(rssGrowthMB, rssMB() - rssBefore);
    closers = fork.syntheticEvents.length;
  }
  const ms = Math.min(...forkMs);
  const raw = Math.min(...rawMs);

  return {
    events: eventCount,
    ms: round(ms, 1),
    rawMs: round(raw, 1),
    ratio: round(ms / raw),
    rssGrowthMB: round(rssGrowthMB, 1),
    closers,
    goal: 'ratio <= 1.5, rssGrowthMB < 50',
  };
}
