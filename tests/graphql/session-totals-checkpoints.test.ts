// Session.totals from checkpoints (store/totals-checkpoints.ts) equal the
// totals summed from scratch over the whole log, on logs forkline's own agent
// loop writes (helpers/agent-logs.ts: compactions, crashes repaired, a last
// turn left open and repaired on import) with prices on some answers, imported
// as recordings, forked at any seq through the server (inherited segments, a
// fork closing a turn at the cut) and continued by appends as a runner's
// appendEvents makes them. Prefixes of each log are read, in a random
// order, with a checkpoint kept after every read that summed anything: a read
// starts from a checkpoint of its own, of its parent's rows, or none.
// Seeded (TOTALS_SEED, TOTALS_RUNS); a failure names the seed and the case.
import fs from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentLog, agentLogSpecArb, type AgentEvent } from '../helpers/agent-logs.ts';
import { sessionTotals, type SessionTotals, type TotalsReads } from '../../src/store/session-totals.ts';
import type { Lineage } from '../../src/store/lineage.ts';

const SEED = Number(process.env.TOTALS_SEED ?? 20261225);
const RUNS = Number(process.env.TOTALS_RUNS ?? 30);

/** The migration's fill of existing logs' checkpoints (prisma/migrations/2026122505_totals_checkpoints). */
const migration = fs.readFileSync(new URL('../../prisma/migrations/2026122505_totals_checkpoints/migration.sql', import.meta.url), 'utf8');
const FILL = migration.slice(migration.indexOf('INSERT INTO "TotalsCheckpoint"'));

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ totalsCheckpointEvery: 1 });
});
afterAll(() => app?.close());

const FORK = `mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } syntheticEvents { seq } } }`;
const TOTALS = `query($id: ID!) { session(id: $id) { totals { turns endedTurns steps toolCalls inputTokens outputTokens costUsd turnMs } } }`;

async function upload(events: ReadonlyArray<AgentEvent & { createdAt: string }>): Promise<string> {
  const header = { format: 'forkline.recording', version: 4, session: { id: 'ses_totals', title: 'totals', runner: 'totals-pool' } };
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: [header, ...events].map((l) => JSON.stringify(l)).join('\n') + '\n',
  });
  const body = (await res.json()) as any;
  if (res.status !== 201) throw new Error(`import refused (${res.status}): ${JSON.stringify(body).slice(0, 500)}`);
  return body.session.id as string;
}

/** Prices on some answers (nano-dollars, as the price table writes them): `priced` picks which. */
function priced<T extends AgentEvent>(events: T[], priced: (i: number) => number | undefined): T[] {
  let answers = 0;
  return events.map((e) => {
    if (e.type !== 'model/message') return e;
    const cost = priced(answers++);
    const data = e.data as { usage?: Record<string, number> };
    return cost === undefined || !data.usage ? e : { ...e, data: { ...data, usage: { ...data.usage, costUsd: cost } } };
  });
}

/** The totals of a log summed from its first event: no checkpoint read, none kept. */
function fromScratch(): TotalsReads {
  const log = app.services.store.log;
  return {
    segmentTotals: (ref, fromSeq) => log.segmentTotals(ref, fromSeq),
    lastOfType: (ref, type, seq) => log.lastOfType(ref, type, seq),
    event: (ref, seq) => log.event(ref, seq),
    range: (ref, from, to) => log.range(ref, from, to),
    totalsCheckpoint: async () => undefined,
    keepTotalsCheckpoint: async () => {},
  };
}

/** What the events themselves add up to, counted here (the time in turns is left to the from-scratch sum). */
function counted(events: ReadonlyArray<{ type: string; data: any }>): Omit<SessionTotals, 'turnMs'> {
  const answers = events.filter((e) => e.type === 'model/message').map((e) => e.data);
  const costs = answers.map((a) => a.usage?.costUsd).filter((c) => c !== undefined);
  return {
    turns: events.filter((e) => e.type === 'turn/start').length,
    endedTurns: events.filter((e) => e.type === 'turn/end').length,
    steps: answers.length,
    toolCalls: answers.reduce((n, a) => n + a.toolCalls.length, 0),
    inputTokens: answers.reduce((n, a) => n + (a.usage?.inputTokens ?? 0), 0),
    outputTokens: answers.reduce((n, a) => n + (a.usage?.outputTokens ?? 0), 0),
    costUsd: costs.length ? Math.round(costs.reduce((n, c) => n + c, 0) * 1e9) / 1e9 : null,
  };
}

describe(`Session.totals from checkpoints (TOTALS_SEED=${SEED}, ${RUNS} runs)`, () => {
  it('equal the totals summed from scratch at every length of generated logs, their forks and their continuations', async () => {
    const store = app.services.store;
    const view = store.forTenant({ tenant: 'local' }).log;
    const cases = fc.sample(
      fc.record({
        spec: agentLogSpecArb,
        cut: fc.nat(),
        prices: fc.array(fc.option(fc.integer({ min: 0, max: 5_000_000 }), { nil: undefined }), { minLength: 1, maxLength: 8 }),
        gaps: fc.array(fc.integer({ min: 0, max: 90_000 }), { minLength: 1, maxLength: 16 }),
        order: fc.nat(),
        batch: fc.integer({ min: 1, max: 5 }),
      }),
      { seed: SEED, numRuns: RUNS },
    );
    let checkpointsUsed = 0;
    let forkClosedTurn = 0;
    let repaired = 0;
    for (const [n, c] of cases.entries()) {
      const what = `case ${n} (TOTALS_SEED=${SEED})`;
      const price = (i: number) => (c.prices[i % c.prices.length] === undefined ? undefined : c.prices[i % c.prices.length]! / 1e9);
      // Times apart by up to a minute and a half: turns last whole seconds, not the import's one instant.
      let at = Date.UTC(2026, 0, 1);
      const parentEvents = priced(agentLog({ ...c.spec, fork: undefined }), price).map((e, i) => ({
        ...e,
        createdAt: new Date((at += c.gaps[i % c.gaps.length])).toISOString(),
      }));
      const parent = await upload(parentEvents);

      /** Lengths of the log (a dozen, and the whole), read in a shuffled order (checkpoints kept as they go), against the sum from scratch. */
      const readAll = async (id: string, label: string) => {
        const l = (await store.log.lineage(id)) as Lineage;
        const { rows } = await store.pool.query<{ eventCount: number }>(`SELECT "eventCount" FROM "Session" WHERE id = $1`, [id]);
        const length = rows[0].eventCount;
        const lengths = Array.from({ length }, (_, i) => i + 1);
        for (let i = lengths.length - 1; i > 0; i--) {
          const j = (c.order + i * 7919) % (i + 1);
          [lengths[i], lengths[j]] = [lengths[j], lengths[i]];
        }
        for (const end of [...lengths.slice(0, 12), length]) {
          const asOf = { ...l, endSeq: end };
          const before = await store.totalsCheckpoints.nearest(asOf, end - 1);
          if (before) checkpointsUsed++;
          expect(await sessionTotals(view, asOf), `${what}: ${label} through seq ${end - 1} (from ${before?.seq ?? 'nothing'})`).toEqual(
            await sessionTotals(fromScratch(), asOf),
          );
        }
        const events = await store.log.range(id, 0, length - 1);
        const whole = (await app.ok(TOTALS, { id })).session.totals;
        const { turnMs, ...counts } = whole;
        expect(counts, `${what}: ${label}`).toEqual(counted(events));
        expect(turnMs, `${what}: ${label}`).toBe((await sessionTotals(fromScratch(), l)).turnMs);
        return events;
      };

      // As the migration fills it for a log written before checkpoints: read from it, the same totals.
      const l = (await store.log.lineage(parent)) as Lineage;
      await store.pool.query(FILL);
      const filled = await store.totalsCheckpoints.nearest(parent);
      const stored = await store.log.range(parent, 0, 100_000);
      expect(filled?.seq, what).toBe(stored.findLast((e) => ['turn/start', 'turn/end', 'model/message'].includes(e.type))?.seq);
      expect(await sessionTotals(view, l), `${what}: from the migration's checkpoint`).toEqual(await sessionTotals(fromScratch(), l));
      await store.pool.query(`DELETE FROM "TotalsCheckpoint" WHERE "sessionId" = $1`, [parent]);

      const parentLog = await readAll(parent, 'parent');
      if (parentLog.some((e) => e.synthetic && e.type === 'turn/end')) repaired++;

      // A fork at any seq, then the turn the child's runner writes after it, appended in batches (read between them).
      const cutSeq = c.cut % parentLog.length;
      const fork = (await app.ok(FORK, { i: { sessionId: parent, atSeq: cutSeq } })).forkSession;
      const child = fork.session.id as string;
      const childLog = await readAll(child, `fork at ${cutSeq}`);
      if (childLog.some((e) => e.type === 'turn/end' && (e.data as any).reason === 'forked')) forkClosedTurn++;
      const generatedChild = priced(agentLog({ ...c.spec, fork: { at: cutSeq, turn: c.spec.fork?.turn ?? c.spec.turns[0] } }), price);
      expect(generatedChild.length, what).toBeGreaterThan(childLog.length);
      const continuation = generatedChild.slice(childLog.length).map(({ type, data }) => ({ type, data }));
      for (let i = 0; i < continuation.length; i += c.batch) {
        await store.append(child, continuation.slice(i, i + c.batch));
        await readAll(child, `fork at ${cutSeq}, ${i + c.batch} events appended`);
      }
    }
    // Reads started from checkpoints (their own or inherited ones), forks closed turns at their cut, imports repaired crashes.
    expect(checkpointsUsed).toBeGreaterThan(cases.length * 10);
    expect(forkClosedTurn).toBeGreaterThan(cases.length / 4);
    expect(repaired).toBeGreaterThan(0);
  }, 600_000);
});
