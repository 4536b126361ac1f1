// append: N events through SessionStore.append in batches of 100, against the
// same rows through a raw multi-row INSERT with pg (goal: ratio >= 0.5).
import { QUICK, round, type BenchContext } from './context.ts';

export async function benchAppend({ store, db }: BenchContext) {
  const events = QUICK ? 20_000 : 100_000;
  const batch = 100;
  const scope = { tenant: 'bench' };
  const payload = (i: number) => ({ type: 'plugin/bench/tick', data: { i, text: 'lorem ipsum dolor sit amet' } });

  const s = await store.createSession(scope, { title: 'append bench' });
  let t = performance.now();
  for (let i = 0; i < events; i += batch) {
    await store.append(
      s.id,
      Array.from({ length: batch }, (_, j) => payload(i + j)),
    );
  }
  const storeMs = performance.now() - t;

  const raw = await store.createSession(scope, {}); // empty log: the raw rows start at seq 0
  t = performance.now();
  for (let i = 0; i < events; i += batch) {
    const values: string[] = [];
    const params: unknown[] = [];
    for (let j = 0; j < batch; j++) {
      const p = params.length;
      values.push(`($${p + 1}, $${p + 2}, $${p + 1}, $${p + 3}, $${p + 4})`);
      const e = payload(i + j);
      params.push(raw.id, i + j, e.type, JSON.stringify(e.data));
    }
    await db.pool.query(`INSERT INTO "Event" ("sessionId", seq, "treeId", type, data) VALUES ${values.join(',')}`, params);
  }
  const rawMs = performance.now() - t;

  const storeEventsPerSec = (events / storeMs) * 1000;
  const rawEventsPerSec = (events / rawMs) * 1000;
  return {
    events,
    storeEventsPerSec: Math.round(storeEventsPerSec),
    rawEventsPerSec: Math.round(rawEventsPerSec),
    ratio: round(storeEventsPerSec / rawEventsPerSec),
    goal: 'ratio >= 0.5',
  };
}
