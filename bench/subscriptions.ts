// subscriptionFanout: N sessionEvents subscribers on one session, each on its
// own WebSocket (in a client process) to a real server (createApp); append →
// receive latency per subscriber (goal: p99 < 50 ms). BENCH_SUBSCRIBERS=N overrides N.
// Then throughput: 200 subscribers on raw sockets (fanout-raw-clients.ts),
// 20,000 events appended in batches as fast as the store takes them
// (deliveries/s until every subscriber has the last one; goal ≥ 200,000), and
// lag while a writer appends 1,000 events/s (goal: p99 < 1 s).
// sessionsList: `sessions(first: 50)` with counts, model and parent over 10,000
// sessions, and the SQL statements one request costs (goal: ≤ 3, p50 < 20 ms).
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createApp } from '../src/app.ts';
import { percentile, QUICK, round, type BenchContext } from './context.ts';

const quiet = () => {};

export async function benchSubscriptionFanout({ databaseUrl, store }: BenchContext) {
  const subscribers = Number(process.env.BENCH_SUBSCRIBERS) || (QUICK ? 100 : 500);
  const rounds = QUICK ? 20 : 40;
  const warmup = 3;
  const app = await createApp({ databaseUrl, log: quiet });
  let clients: ChildProcess | undefined;
  try {
    const session = await store.createSession({ tenant: 'local' }, { title: 'fanout bench' });
    clients = fork(fileURLToPath(new URL('./fanout-clients.ts', import.meta.url)), [app.url.replace(/^http/, 'ws'), session.id, String(subscribers)], {
      execArgv: ['--import', 'tsx'],
    });
    const arrived = new Map<number, (times: number[]) => void>();
    const received = (seq: number) => new Promise<number[]>((resolve) => arrived.set(seq, resolve));
    clients.on('message', (m: { seq: number; times: number[] } | { error: string }) => {
      if ('error' in m) throw new Error(`subscriber error: ${m.error}`);
      arrived.get(m.seq)?.(m.times);
    });
    await received(0); // every subscriber caught up on the title: all are listening

    const latencies: number[] = [];
    for (let r = 0, seq = 1; r < rounds; r++, seq++) {
      const all = received(seq);
      const sentAt = performance.timeOrigin + performance.now();
      await store.append(session.id, [{ type: 'session/title', data: { title: `round ${r}` } }]);
      const times = await all;
      if (r >= warmup) for (const t of times) latencies.push(t - sentAt);
      await new Promise((res) => setTimeout(res, 20));
    }
    latencies.sort((a, b) => a - b);
    return {
      subscribers,
      appends: rounds - warmup,
      p50Ms: round(percentile(latencies, 50)),
      p99Ms: round(percentile(latencies, 99)),
      maxMs: round(latencies[latencies.length - 1]),
      goal: 'p99 < 50 ms',
      ...(await fanoutThroughput(app.url, store)),
      throughputGoal: 'deliveriesPerSec >= 200,000; lagP99Ms < 1000 at 1,000 events/s',
    };
  } finally {
    if (clients && clients.exitCode === null) {
      const c = clients;
      c.send('close');
      await new Promise((r) => c.once('exit', r));
    }
    await app.close();
  }
}

const LIST = `{ sessions(first: 50) { edges { node { id title status eventCount turnCount model { provider model } parent { id title } } } pageInfo { hasNextPage endCursor } } }`;

export async function benchSessionsList({ databaseUrl, db }: BenchContext) {
  const sessions = 10_000;
  const runs = QUICK ? 40 : 200;
  // In bulk, one statement: every tenth session is a fork of the one before it.
  await db.pool.query(`DELETE FROM "Session" WHERE id LIKE 'ses_list_%' AND "parentId" IS NOT NULL`);
  await db.pool.query(`DELETE FROM "Session" WHERE id LIKE 'ses_list_%'`);
  await db.pool.query(`DELETE FROM "SessionTree" WHERE id LIKE 'ses_list_%'`);
  await db.pool.query(
    `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title, "eventCount", "turnCount", "parentId", "forkedAtSeq", "createdAt", "updatedAt")
     SELECT 'ses_list_' || lpad(i::text, 6, '0'), 'ses_list_' || lpad((CASE WHEN i % 10 = 0 THEN i - 1 ELSE i END)::text, 6, '0'), 'local', 'session ' || i, (i % 97) + 1, i % 7,
            CASE WHEN i % 10 = 0 THEN 'ses_list_' || lpad((i - 1)::text, 6, '0') END,
            CASE WHEN i % 10 = 0 THEN 0 END,
            now() + (i || ' milliseconds')::interval, now()
       FROM generate_series(1, $1) AS i RETURNING id, "treeId")
     INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s`,
    [sessions],
  );
  let queries = 0;
  let counting = false;
  const app = await createApp({ databaseUrl, log: quiet, onQuery: () => counting && queries++ });
  try {
    const request = async () => {
      const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: LIST }) });
      const body = (await res.json()) as { data?: { sessions: { edges: Array<{ node: { parent: unknown } }> } }; errors?: unknown };
      if (body.errors || body.data?.sessions.edges.length !== 50) throw new Error(`sessions query failed: ${JSON.stringify(body.errors)}`);
      return body.data.sessions.edges;
    };
    for (let i = 0; i < 5; i++) await request(); // warm-up (query plans, Prisma compile)
    counting = true;
    const edges = await request();
    counting = false;
    const sqlQueries = queries;
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t = performance.now();
      await request();
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    return {
      sessions,
      withParent: edges.filter((e) => e.node.parent).length,
      p50Ms: round(percentile(times, 50)),
      p99Ms: round(percentile(times, 99)),
      sqlQueries,
      goal: 'sqlQueries <= 3, p50 < 20 ms',
    };
  } finally {
    await app.close();
  }
}

async function fanoutThroughput(url: string, store: BenchContext['store']) {
  const subscribers = 200;
  const events = QUICK ? 5_000 : 20_000;
  const batch = 100;
  const sampleEvery = 50;
  const session = await store.createSession({ tenant: 'local' }, { title: 'fanout throughput' }); // seq 0
  const clients = fork(
    fileURLToPath(new URL('./fanout-raw-clients.ts', import.meta.url)),
    [url.replace(/^http/, 'ws'), session.id, String(subscribers), String(sampleEvery)],
    {
      execArgv: ['--import', 'tsx'],
    },
  );
  const waiting = new Map<number, (at: number) => void>();
  let samples: (value: Array<[number, number[]]>) => void = () => {};
  clients.on('message', (m: { reached?: number; at?: number; samples?: Array<[number, number[]]>; error?: string }) => {
    if (m.error) console.error(`fanout client: ${m.error}`);
    if (m.reached !== undefined) waiting.get(m.reached)?.(m.at!);
    if (m.samples) samples(m.samples);
  });
  const reached = (seq: number) => new Promise<number>((resolve) => (waiting.set(seq, resolve), clients.send({ cmd: 'wait', seq })));
  const takeSamples = () => new Promise<Array<[number, number[]]>>((resolve) => ((samples = resolve), clients.send({ cmd: 'samples' })));
  const append = (from: number, n: number) =>
    store.append(
      session.id,
      Array.from({ length: n }, (_, i) => ({ type: 'plugin/bench/tick', data: { i: from + i, text: 'a fairly ordinary event payload of a few dozen bytes' } })),
    );
  try {
    await reached(0); // all subscribed
    await takeSamples();
    // Throughput: appended as fast as the store takes them.
    const started = performance.timeOrigin + performance.now();
    for (let i = 0; i < events; i += batch) await append(i, batch);
    const allAt = await reached(events);
    const deliveriesPerSec = Math.round((subscribers * events) / ((allAt - started) / 1000));
    await takeSamples();

    // Lag at a steady 1,000 events/s: 50 every 50 ms.
    const seconds = QUICK ? 4 : 10;
    const committedAt = new Map<number, number>();
    let seq = events + 1;
    const tickStart = performance.now();
    for (let t = 0; t < seconds * 20; t++) {
      const wait = tickStart + t * 50 - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await append(seq, 50);
      const at = performance.timeOrigin + performance.now();
      for (let k = seq; k < seq + 50; k++) committedAt.set(k, at);
      seq += 50;
    }
    await reached(seq - 1);
    const lags: number[] = [];
    for (const [s, times] of await takeSamples()) {
      const c = committedAt.get(s);
      if (c !== undefined) for (const t of times) lags.push(t - c);
    }
    lags.sort((a, b) => a - b);
    return {
      throughputSubscribers: subscribers,
      throughputEvents: events,
      deliveriesPerSec,
      lagP50Ms: round(percentile(lags, 50)),
      lagP99Ms: round(percentile(lags, 99)),
      lagMaxMs: round(lags[lags.length - 1]),
    };
  } finally {
    if (clients.exitCode === null) {
      clients.send({ cmd: 'close' });
      await new Promise((r) => clients.once('exit', r));
    }
  }
}
