// `npm run bench:read-alternation`: readThroughput's two reads (the sessions page and
// an events page of 100 in a 20,000-event log, the same data and queries), served
// by several builds' `src/main.ts` and by the raw baseline (bench/raw-read-server.ts)
// on one database, hammered in turn for short windows (8 keep-alive connections),
// round after round, the order reversed every other round. On a loaded machine
// whole-bench runs minutes apart differ by 2-5x; windows of a second, interleaved,
// see the same load. Prints each server's CPU per request (and Postgres's) per
// round, and per round each build's ratio to the first.
//
//   BENCH_BUILDS=/path/to/base,/path/to/this  (checkouts with `npm ci` done; default: this one)
//   BENCH_ROUNDS=10  BENCH_WINDOW_MS=1000  BENCH_READ_KINDS=sessions,events
//     (`typename`: `{ __typename }`, no database read: the fixed cost of a request through each stack)
//   BENCH_EVENT_FIELDS='id seq type createdAt'  (the events page's node selection)
//   BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/p'  (node flags for every server, the raw one too)
//   BENCH_BUILD_NODE_ARGS='--max-semi-space-size=32,'  (node flags per build, in BENCH_BUILDS' order; the
//                same checkout may be named twice in BENCH_BUILDS to compare flags); BENCH_RAW_NODE_ARGS the raw server's
//   BENCH_BUILD_ENV='NODE_ENV=production,'  (environment per build, in BENCH_BUILDS' order, space-separated NAME=value; the same
//                checkout may be named twice with a different one. Two processes of one build differ by up to 10% in CPU
//                per request over a whole run, whatever their place: name a build twice (`AA=1`) to see the run's spread)
//   BENCH_CHILD_LOG=/tmp/gc  (each server's stdout to /tmp/gc.<script>.<pid>: with BENCH_NODE_ARGS=--trace-gc)
//   BENCH_SLICE_MS=200  (instead of one-second windows, each with its own warm-up and connections: slices this
//                long on connections kept open, the servers' order rotated every round, CPU from each thread's
//                schedstat in ns; with BENCH_ROUNDS=60 or more, a change of a few percent shows on a loaded
//                machine: the load moves little within a round, and each server gets every place in the order)
//   BENCH_GC=1  (each server runs with --trace-gc-nvp: per round, the bytes it allocated per request, the bytes
//                its scavenges kept (survived or promoted) per request, and its GC pauses per request)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { openBenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';
import { hammer, processCpuSeconds } from './load.ts';
import { postmasterOf, processTotals, threadsCpuNs } from './turns.ts';

const scope = { tenant: 'local' };
const here = fileURLToPath(new URL('..', import.meta.url));
const builds = process.env.BENCH_BUILDS?.split(',').filter(Boolean) ?? [here];
const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const windowMs = Number(process.env.BENCH_WINDOW_MS ?? 1000);
const kinds = (process.env.BENCH_READ_KINDS ?? 'sessions,events').split(',') as Array<'sessions' | 'events' | 'typename'>;
const eventFields = process.env.BENCH_EVENT_FIELDS ?? 'id seq type data inherited synthetic createdAt';
const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
const buildArgs = (process.env.BENCH_BUILD_NODE_ARGS ?? '').split(',').map((a) => a.split(' ').filter(Boolean));
const buildEnv = (process.env.BENCH_BUILD_ENV ?? '').split(',').map((e) => e.split(' ').filter(Boolean));
const childLog = process.env.BENCH_CHILD_LOG;
const gcTrace = process.env.BENCH_GC === '1';
const sliceMs = Number(process.env.BENCH_SLICE_MS ?? 0);

/** `body` posted back to back on 8 connections of `agent` (kept open between slices) for `ms`: the requests answered. */
async function slice(url: string, body: string, agent: http.Agent, ms: number): Promise<number> {
  const target = new URL(url);
  const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent, headers }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode} from ${url}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  let n = 0;
  const until = performance.now() + ms;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (performance.now() < until) {
        await post();
        n++;
      }
    }),
  );
  return n;
}

/** A server's collections so far, from its --trace-gc-nvp lines. */
interface GcTotals {
  allocated: number;
  kept: number;
  pauseMs: number;
}
const GC_FIELDS = /pause=([\d.]+) .* allocated=(\d+) promoted=(\d+) new_space_survived=(\d+)/;

/** `script` of checkout `dir`, run with that checkout's tsx; resolves with the URL it prints. */
function start(dir: string, script: string, env: Record<string, string>, args: string[] = []): Promise<{ url: string; child: ChildProcess; gc: GcTotals }> {
  const child = spawn(process.execPath, [...nodeArgs, ...args, ...(gcTrace ? ['--trace-gc-nvp'] : []), '--import', 'tsx', script], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  if (childLog) child.stdout!.pipe(fs.createWriteStream(`${childLog}.${script.replace(/\W/g, '_')}.${child.pid}`));
  const gc: GcTotals = { allocated: 0, kept: 0, pauseMs: 0 };
  if (gcTrace) {
    let partial = '';
    child.stdout!.on('data', (c: Buffer) => {
      const lines = (partial + c).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        const m = GC_FIELDS.exec(line);
        if (!m) continue;
        gc.pauseMs += Number(m[1]);
        gc.allocated += Number(m[2]);
        gc.kept += Number(m[3]) + Number(m[4]);
      }
    });
  }
  return new Promise((resolve, reject) => {
    const look = (c: Buffer) => {
      out += c;
      const m = /"url":"([^"]+)"/.exec(out) ?? /listening (\S+)/.exec(out);
      if (!m) return;
      // Found: the rest of the output is not searched (with --trace-gc-nvp it is a line per collection).
      child.stdout!.off('data', look);
      child.stderr!.off('data', look);
      out = '';
      resolve({ url: m[1], child, gc });
    };
    child.stdout!.on('data', look);
    child.stderr!.on('data', look);
    child.once('exit', (code) => reject(new Error(`${dir} ${script} exited (${code}): ${out.slice(-500)}`)));
  });
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const ms = (a: number[]) => a.map((x) => x.toFixed(3)).join(' ');

const ctx = await openBenchContext();
const servers: Array<{ name: string; url: string; child: ChildProcess; gc: GcTotals }> = [];
try {
  const long = await createLongSession(ctx, 20_000);
  for (let i = 0; i < 10; i++) await ctx.store.fork(scope, long.id, 1000 + i * 1500);
  for (let i = 0; i < 200; i++) await ctx.store.createSession(scope, { title: `small ${i}` });
  await ctx.db.pool.query('ANALYZE');
  const bodies = {
    sessions: JSON.stringify({ query: '{ sessions(first: 50) { edges { node { id title eventCount turnCount parent { id } } } } }' }),
    events: JSON.stringify({
      query: `query($id: ID!, $after: Int) { session(id: $id) { events(afterSeq: $after, first: 100) { edges { node { ${eventFields} } } } } }`,
      variables: { id: long.id, after: 10_000 },
    }),
    typename: JSON.stringify({ query: '{ __typename }' }),
  };
  const checks = {
    sessions: (j: any) => j.data?.sessions?.edges?.length === 50,
    events: (j: any) => j.data?.session?.events?.edges?.length === 100,
    typename: (j: any) => j.data?.__typename === 'Query',
  };
  for (const [i, dir] of builds.entries()) {
    const args = buildArgs[i] ?? [];
    const env = buildEnv[i] ?? [];
    const name = [dir, ...env, ...args].join(' ');
    const vars = Object.fromEntries(env.map((v) => [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)]));
    servers.push({ name, ...(await start(dir, 'src/main.ts', { ...vars, DATABASE_URL: ctx.databaseUrl, PORT: '0' }, args)) });
  }
  // The raw baseline answers the events page with every field, whatever BENCH_EVENT_FIELDS says.
  const rawArgs = process.env.BENCH_RAW_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  servers.push({ name: 'raw', ...(await start(here, 'bench/raw-read-server.ts', { DATABASE_URL: ctx.databaseUrl }, rawArgs)) });
  const postmaster = await postmasterOf(ctx.db.pool);
  const postgresMs = () => (postmaster === undefined ? NaN : processTotals((pid, _c, ppid) => pid === postmaster || ppid === postmaster, postmaster).cpuMs);
  const cpu = new Map<string, number[]>();
  const pg = new Map<string, number[]>();
  /** Per server and read, per round: KiB allocated, KiB kept by scavenges and GC pause µs, each per request. */
  const gcs = new Map<string, { allocated: number[]; kept: number[]; pauseUs: number[] }>();
  const served = new Map<string, number>();
  /** Requests each server answered, the warm-up's included (a profile of its whole life is per these). */
  const answered = new Map<string, number>();
  const count = (s: { name: string }, n: number) => answered.set(s.name, (answered.get(s.name) ?? 0) + n);
  for (const s of servers) for (const k of kinds) count(s, (await hammer(s.url, bodies[k], { connections: 8, ms: 4 * windowMs, check: checks[k] })).requests); // warm-up
  /** Per server and read, over every slice: CPU ns and requests (BENCH_SLICE_MS). */
  const totals = new Map<string, { ns: number; requests: number }>();
  const agents = new Map<string, http.Agent>();
  for (let r = 0; r < rounds && sliceMs > 0; r++) {
    for (const k of kinds) {
      // Each server takes every place in the order in turn.
      for (let i = 0; i < servers.length; i++) {
        const s = servers[(i + r) % servers.length];
        const key = `${k} ${s.name}`;
        if (!agents.has(key)) agents.set(key, new http.Agent({ keepAlive: true, maxSockets: 8 }));
        const before = threadsCpuNs(s.child.pid!);
        const gcBefore = { ...s.gc };
        const n = await slice(s.url, bodies[k], agents.get(key)!, sliceMs);
        const ns = threadsCpuNs(s.child.pid!) - before;
        const t = totals.get(key) ?? { ns: 0, requests: 0 };
        totals.set(key, { ns: t.ns + ns, requests: t.requests + n });
        cpu.set(key, [...(cpu.get(key) ?? []), ns / 1e6 / n]);
        pg.set(key, [...(pg.get(key) ?? []), NaN]);
        served.set(key, (served.get(key) ?? 0) + n);
        count(s, n);
        if (gcTrace) {
          const g = gcs.get(key) ?? { allocated: [], kept: [], pauseUs: [] };
          g.allocated.push((s.gc.allocated - gcBefore.allocated) / 1024 / n);
          g.kept.push((s.gc.kept - gcBefore.kept) / 1024 / n);
          g.pauseUs.push(((s.gc.pauseMs - gcBefore.pauseMs) * 1000) / n);
          gcs.set(key, g);
        }
      }
    }
  }
  for (const agent of agents.values()) agent.destroy();
  for (let r = 0; r < rounds && !(sliceMs > 0); r++) {
    for (const k of kinds) {
      for (const s of r % 2 ? [...servers].reverse() : servers) {
        const cpuBefore = processCpuSeconds(s.child.pid!);
        const pgBefore = postgresMs();
        const gcBefore = { ...s.gc };
        const res = await hammer(s.url, bodies[k], { connections: 8, ms: windowMs, check: checks[k] });
        const key = `${k} ${s.name}`;
        cpu.set(key, [...(cpu.get(key) ?? []), ((processCpuSeconds(s.child.pid!) - cpuBefore) * 1000) / res.requests]);
        pg.set(key, [...(pg.get(key) ?? []), (postgresMs() - pgBefore) / res.requests]);
        served.set(key, (served.get(key) ?? 0) + res.requests);
        count(s, res.requests);
        if (gcTrace) {
          // The collections of the window's allocations may come a moment later: a short wait for its stdout.
          await new Promise((r) => setTimeout(r, 50));
          const g = gcs.get(key) ?? { allocated: [], kept: [], pauseUs: [] };
          g.allocated.push((s.gc.allocated - gcBefore.allocated) / 1024 / res.requests);
          g.kept.push((s.gc.kept - gcBefore.kept) / 1024 / res.requests);
          g.pauseUs.push(((s.gc.pauseMs - gcBefore.pauseMs) * 1000) / res.requests);
          gcs.set(key, g);
        }
      }
    }
  }
  for (const s of servers) console.log(`${s.name}: ${answered.get(s.name)} requests answered, warm-up included`);
  for (const k of kinds) {
    for (const s of servers) {
      const key = `${k} ${s.name}`;
      console.log(
        `${key}: server CPU ms/request median ${median(cpu.get(key)!).toFixed(3)} [${ms(cpu.get(key)!)}]; Postgres median ${median(pg.get(key)!).toFixed(3)}; ${served.get(key)} requests`,
      );
      const g = gcs.get(key);
      if (g) {
        console.log(
          `${key}: per request, KiB allocated median ${median(g.allocated).toFixed(1)} [${g.allocated.map((x) => x.toFixed(0)).join(' ')}], ` +
            `KiB kept by scavenges ${median(g.kept).toFixed(2)}, GC pause µs ${median(g.pauseUs).toFixed(1)} [${g.pauseUs.map((x) => x.toFixed(0)).join(' ')}]`,
        );
      }
    }
    if (sliceMs > 0) {
      const perRequest = (s: { name: string }) => totals.get(`${k} ${s.name}`)!.ns / 1e6 / totals.get(`${k} ${s.name}`)!.requests;
      for (const s of servers) console.log(`${k} ${s.name}: server CPU ms/request over all slices ${perRequest(s).toFixed(4)}`);
      for (const s of servers.slice(1))
        console.log(`${k} ${s.name} / ${servers[0].name}, server CPU over all slices: ${(perRequest(s) / perRequest(servers[0])).toFixed(3)}`);
    }
    const first = cpu.get(`${k} ${servers[0].name}`)!;
    for (const s of servers.slice(1)) {
      const ratios = cpu.get(`${k} ${s.name}`)!.map((x, i) => x / first[i]);
      console.log(
        `${k} ${s.name} / ${servers[0].name}, server CPU per round: median ${median(ratios).toFixed(3)} [${ratios.map((x) => x.toFixed(2)).join(' ')}]`,
      );
    }
  }
} finally {
  for (const s of servers) s.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 2000));
  await ctx.close();
}
