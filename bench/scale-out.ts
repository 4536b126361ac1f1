// scaleOut: what the engines teams already run cost or give (docs/operations.md
// "Scaling out"). Turns/s (the `turns` section's run: 1,000 sessions sent one
// message at once, after untimed warm-up turns) and read req/s (a sessions page
// and an events page of 100, 8 keep-alive connections) with 1 and 2 `src/main.ts`
// processes, directly on Postgres and behind a real PgBouncer in transaction
// mode (1.24.1, built by scripts/build-pgbouncer.mjs, with protocol-level
// prepared statements on, like the direct runs); then events-page req/s
// of one process served from a streaming hot standby (DATABASE_READ_URL) vs the
// primary, and likewise a session query's row and a searchSessions page. Direct and pooled runs alternate. On this 2-core machine the
// standby, PgBouncer and Postgres share the cores with the servers and the load
// generator: the figures say what the layers cost here, not what a second
// server would add.
import { pgConfigFromUrl } from '../src/db/pg-config.ts';
import { QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';
import { hammer, type LoadResult } from './load.ts';
import { runTurns, startServer, stop } from './turns.ts';
import { startPgBouncer } from '../tests/helpers/pgbouncer.ts';
import { startStandby, standbyReads } from '../tests/helpers/standby.ts';

const scope = { tenant: 'local' };
const POOL_SIZE = 20; // PgBouncer's server connections: what two processes' 10 each would use directly
const CONNECTIONS = 8;

export async function benchScaleOut(ctx: BenchContext) {
  const { databaseUrl, store } = ctx;
  const database = pgConfigFromUrl(databaseUrl).database!;
  const serverUrl = databaseUrl.slice(0, databaseUrl.lastIndexOf('/'));
  const ms = QUICK ? 2000 : 5000;
  const sessions = QUICK ? 200 : 1_000;
  const long = await createLongSession(ctx, 20_000);
  for (let i = 0; i < 100; i++) await store.createSession(scope, { title: `scale ${i}` });
  const bodies = {
    sessions: JSON.stringify({ query: '{ sessions(first: 50) { edges { node { id title eventCount turnCount parent { id } } } } }' }),
    events: JSON.stringify({
      query:
        'query($id: ID!, $after: Int) { session(id: $id) { events(afterSeq: $after, first: 100) { edges { node { id seq type data inherited synthetic createdAt } } } } }',
      variables: { id: long.id, after: 10_000 },
    }),
  };
  const checks = {
    sessions: (j: any) => j.data?.sessions?.edges?.length === 50,
    events: (j: any) => j.data?.session?.events?.edges?.length === 100,
  };

  // A PgBouncer of its own for each pooled run: one left from an earlier run would
  // keep its server connections open and count in the next run's peak.
  let version = '';
  const modes = ['direct', 'pgbouncer'] as const;
  type Mode = (typeof modes)[number];
  const within = async <T>(mode: Mode, fn: (env: Record<string, string>) => Promise<T>): Promise<T> => {
    if (mode === 'direct') return fn({});
    const bouncer = await startPgBouncer(serverUrl, [database], { poolSize: POOL_SIZE, maxClients: 5000, build: 'source', maxPreparedStatements: 200 });
    version = bouncer.version;
    try {
      return await fn({ DATABASE_URL: bouncer.url(database), DATABASE_DIRECT_URL: databaseUrl });
    } finally {
      await bouncer.stop();
    }
  };

  /** Read req/s of `kind` with `processes` servers (connections split between them), summed. */
  const reads = async (env: Record<string, string>, processes: number, kind: 'sessions' | 'events'): Promise<LoadResult> => {
    const servers = await Promise.all(Array.from({ length: processes }, () => startServer(databaseUrl, env)));
    try {
      const results = await Promise.all(servers.map((s) => hammer(s.url, bodies[kind], { connections: CONNECTIONS / processes, ms, check: checks[kind] })));
      return {
        requests: results.reduce((n, r) => n + r.requests, 0),
        requestsPerSec: round(
          results.reduce((n, r) => n + r.requestsPerSec, 0),
          1,
        ),
        p50Ms: Math.max(...results.map((r) => r.p50Ms)),
        p99Ms: Math.max(...results.map((r) => r.p99Ms)),
      };
    } finally {
      await Promise.all(servers.map(stop));
    }
  };

  const turns: Record<string, number> = {};
  const peaks: Record<string, number> = {};
  const read: Record<string, LoadResult> = {};
  for (const processes of [1, 2]) {
    for (const mode of modes) {
      const r = await within(mode, (env) => runTurns(ctx, processes, sessions, undefined, undefined, env));
      if (r.completedTurns !== sessions) throw new Error(`${mode} ×${processes}: ${r.completedTurns} of ${sessions} turns completed`);
      turns[`${mode}${processes}`] = r.turnsPerSec;
      peaks[`${mode}${processes}`] = r.peakConnections;
    }
    for (const kind of ['sessions', 'events'] as const) {
      for (const mode of modes) read[`${kind}.${mode}${processes}`] = await within(mode, (env) => reads(env, processes, kind));
    }
  }
  // The standby is a file copy of the embedded Postgres's data directory: not possible for an external server.
  const standby = process.env.BENCH_DATABASE_URL
    ? { eventsPageFromStandbyReqPerSec: 'not measured: BENCH_DATABASE_URL names an external server (the bench makes its standby from the embedded one)' }
    : await standbyPages(ctx, serverUrl, long.id, bodies.events, checks.events, ms);
  const rps = (k: string) => read[k].requestsPerSec;
  return {
    pgbouncer: `${version}, transaction mode, pool ${POOL_SIZE}`,
    sessions,
    turnsPerSec: `1 process: direct ${turns.direct1}, PgBouncer ${turns.pgbouncer1} (${round(turns.pgbouncer1 / turns.direct1)}×); 2 processes: direct ${turns.direct2}, PgBouncer ${turns.pgbouncer2} (${round(turns.pgbouncer2 / turns.direct2)}×)`,
    peakServerConnections: `direct ${peaks.direct1} / ${peaks.direct2}, PgBouncer ${peaks.pgbouncer1} / ${peaks.pgbouncer2} (1 / 2 processes)`,
    sessionsPageReqPerSec: `1 process: direct ${rps('sessions.direct1')}, PgBouncer ${rps('sessions.pgbouncer1')} (${round(rps('sessions.pgbouncer1') / rps('sessions.direct1'))}×); 2: direct ${rps('sessions.direct2')}, PgBouncer ${rps('sessions.pgbouncer2')} (${round(rps('sessions.pgbouncer2') / rps('sessions.direct2'))}×)`,
    eventsPageReqPerSec: `1 process: direct ${rps('events.direct1')}, PgBouncer ${rps('events.pgbouncer1')} (${round(rps('events.pgbouncer1') / rps('events.direct1'))}×); 2: direct ${rps('events.direct2')}, PgBouncer ${rps('events.pgbouncer2')} (${round(rps('events.pgbouncer2') / rps('events.direct2'))}×)`,
    ...standby,
  };
}

/** What one process reads from a hot standby vs the primary: each kind alternating, best of two each. */
type StandbyBenchRead = { name: 'events' | 'session' | 'search'; body: string; check: (j: any) => boolean };

/**
 * Events pages, a session query's row (with fields that read the log) and a
 * searchSessions page of one process, with a hot standby vs without.
 */
async function standbyPages(ctx: BenchContext, serverUrl: string, sessionId: string, eventsBody: string, eventsCheck: (j: any) => boolean, ms: number) {
  const database = pgConfigFromUrl(ctx.databaseUrl).database!;
  const standby = await startStandby(serverUrl);
  const kinds: StandbyBenchRead[] = [
    { name: 'events', body: eventsBody, check: eventsCheck },
    {
      name: 'session',
      body: JSON.stringify({
        query: 'query($id: ID!) { session(id: $id) { id title status eventCount turnCount lastAnswer { seq } } }',
        variables: { id: sessionId },
      }),
      check: (j) => j.data?.session?.id === sessionId && j.data.session.lastAnswer != null,
    },
    {
      name: 'search',
      body: JSON.stringify({ query: '{ searchSessions(query: "lorem", first: 20) { edges { node { kind seq } } } }' }),
      check: (j) => j.data?.searchSessions?.edges?.length === 20,
    },
  ];
  try {
    const env = { primary: {}, standby: { DATABASE_READ_URL: `${standby.serverUrl}/${database}` } } as const;
    const best: Record<string, LoadResult> = {};
    const served: Record<string, string> = {};
    for (const kind of kinds) {
      for (let r = 0; r < 2; r++) {
        for (const [name, e] of Object.entries(env)) {
          const server = await startServer(ctx.databaseUrl, e);
          try {
            const res = await hammer(server.url, kind.body, { connections: CONNECTIONS, ms, check: kind.check });
            const key = `${kind.name}.${name}`;
            if (!best[key] || res.requestsPerSec > best[key].requestsPerSec) best[key] = res;
            if (name === 'standby') {
              const by = standbyReads(await (await fetch(server.url.replace(/graphql$/, 'metrics'))).text(), [kind.name]);
              served[kind.name] = `${by.standby} of ${by.standby + by.primary + by.both}`;
            }
          } finally {
            await stop(server);
          }
        }
      }
    }
    const line = (kind: string) => {
      const [s, p] = [best[`${kind}.standby`], best[`${kind}.primary`]];
      return `standby ${s.requestsPerSec} (p50 ${s.p50Ms} ms, p99 ${s.p99Ms}), primary ${p.requestsPerSec} (p50 ${p.p50Ms}, p99 ${p.p99Ms}): ${round(s.requestsPerSec / p.requestsPerSec)}×`;
    };
    return {
      eventsPageFromStandbyReqPerSec: line('events'),
      sessionReadFromStandbyReqPerSec: line('session'),
      searchFromStandbyReqPerSec: line('search'),
      standbyServed: `reads of the last standby run answered by the standby: events pages ${served.events}, session rows ${served.session}, searches ${served.search}`,
    };
  } finally {
    await standby.destroy();
  }
}
