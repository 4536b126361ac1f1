// append: N events through SessionStore.append in batches of 100, against the
// same rows through a raw multi-row INSERT with pg (goal: ratio >= 0.9).
// Both write plugin events into Event with its indexes, foreign key and
// generated search vector (null for these types on both sides).
import { QUICK, round, type BenchContext } from './context.ts';
import { postmasterOf, processTotals } from './turns.ts';

export async function benchAppend({ store, db }: BenchContext) {
  const events = QUICK ? 20_000 : 100_000;
  const batch = 100;
  // Both paths run warm: measured cold, the store (which ran first) paid for compiling the code both use (the pg
  // client's among it), and the raw loop after it did not.
  const warmup = 2_000;
  const chunk = 2_000;
  const scope = { tenant: 'bench' };
  const payload = (i: number) => ({ type: 'plugin/bench/tick', data: { i, text: 'lorem ipsum dolor sit amet' } });

  const storeAppends = async (sessionId: string, from: number, count: number) => {
    for (let i = from; i < from + count; i += batch) {
      await store.append(
        sessionId,
        Array.from({ length: batch }, (_, j) => payload(i + j)),
      );
    }
  };
  const rawInserts = async (sessionId: string, from: number, count: number) => {
    for (let i = from; i < from + count; i += batch) {
      const values: string[] = [];
      const params: unknown[] = [];
      for (let j = 0; j < batch; j++) {
        const p = params.length;
        values.push(`($${p + 1}, $${p + 2}, $${p + 1}, $${p + 3}, $${p + 4}, $${p + 5})`);
        const e = payload(i + j);
        params.push(sessionId, i + j, e.type, JSON.stringify(e.data), scope.tenant);
      }
      // The same rows as the store's: an event carries its session's tenant (search scopes by it).
      await db.pool.query(`INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, tenant) VALUES ${values.join(',')}`, params);
    }
  };
  // Empty logs (a root session is its own tree): the raw rows start at seq 0.
  const emptyLog = async () => (await store.createSession(scope, {})).id;

  await storeAppends(await emptyLog(), 0, warmup);
  await rawInserts(await emptyLog(), 0, warmup);

  // Interleaved in chunks, in alternating order: on a shared machine both sides see the same minutes.
  const s = await emptyLog();
  const raw = await emptyLog();
  // CPU time besides wall time: it hardly moves with the machine's other load (this process's, and the embedded
  // Postgres's processes', when it runs here; NaN otherwise).
  const postmaster = await postmasterOf(db.pool);
  const postgresCpuMs = () =>
    postmaster === undefined ? NaN : processTotals((pid, _comm, ppid) => pid === postmaster || ppid === postmaster, postmaster).cpuMs;
  const nodeCpuMs = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  const totals = { store: { ms: 0, nodeCpuMs: 0, postgresCpuMs: 0 }, raw: { ms: 0, nodeCpuMs: 0, postgresCpuMs: 0 } };
  const timed = async (side: keyof typeof totals, run: () => Promise<void>) => {
    const pg0 = postgresCpuMs();
    const node0 = nodeCpuMs();
    const t = performance.now();
    await run();
    totals[side].ms += performance.now() - t;
    totals[side].nodeCpuMs += nodeCpuMs() - node0;
    totals[side].postgresCpuMs += postgresCpuMs() - pg0;
  };
  for (let from = 0, k = 0; from < events; from += chunk, k++) {
    const count = Math.min(chunk, events - from);
    const store = () => timed('store', () => storeAppends(s, from, count));
    const rawSide = () => timed('raw', () => rawInserts(raw, from, count));
    if (k % 2 === 0) {
      await store();
      await rawSide();
    } else {
      await rawSide();
      await store();
    }
  }
  const storeMs = totals.store.ms;
  const rawMs = totals.raw.ms;
  const appends = events / batch;
  const cpuPerAppend = (side: keyof typeof totals) =>
    `node ${round(totals[side].nodeCpuMs / appends)} + postgres ${round(totals[side].postgresCpuMs / appends)} ms`;

  const storeEventsPerSec = (events / storeMs) * 1000;
  const rawEventsPerSec = (events / rawMs) * 1000;
  return {
    events,
    storeEventsPerSec: Math.round(storeEventsPerSec),
    rawEventsPerSec: Math.round(rawEventsPerSec),
    ratio: round(storeEventsPerSec / rawEventsPerSec),
    storeCpuPerAppend: cpuPerAppend('store'),
    rawCpuPerAppend: cpuPerAppend('raw'),
    cpuRatio: round((totals.raw.nodeCpuMs + totals.raw.postgresCpuMs) / (totals.store.nodeCpuMs + totals.store.postgresCpuMs)),
    goal: 'ratio >= 0.9',
  };
}
