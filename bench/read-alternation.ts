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
//   BENCH_EVENT_FIELDS='id seq type createdAt'  (the events page's node selection)
//   BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/p'  (node flags for every server, the raw one too)
//   BENCH_CHILD_LOG=/tmp/gc  (each server's stdout to /tmp/gc.<script>.<pid>: with BENCH_NODE_ARGS=--trace-gc)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { openBenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';
import { hammer, processCpuSeconds } from './load.ts';
import { postmasterOf, processTotals } from './turns.ts';

const scope = { tenant: 'local' };
const here = fileURLToPath(new URL('..', import.meta.url));
const builds = process.env.BENCH_BUILDS?.split(',').filter(Boolean) ?? [here];
const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const windowMs = Number(process.env.BENCH_WINDOW_MS ?? 1000);
const kinds = (process.env.BENCH_READ_KINDS ?? 'sessions,events').split(',') as Array<'sessions' | 'events'>;
const eventFields = process.env.BENCH_EVENT_FIELDS ?? 'id seq type data inherited synthetic createdAt';
const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
const childLog = process.env.BENCH_CHILD_LOG;

/** `script` of checkout `dir`, run with that checkout's tsx; resolves with the URL it prints. */
function start(dir: string, script: string, env: Record<string, string>): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  if (childLog) child.stdout!.pipe(fs.createWriteStream(`${childLog}.${script.replace(/\W/g, '_')}.${child.pid}`));
  return new Promise((resolve, reject) => {
    const look = (c: Buffer) => {
      out += c;
      const m = /"url":"([^"]+)"/.exec(out) ?? /listening (\S+)/.exec(out);
      if (m) resolve({ url: m[1], child });
    };
    child.stdout!.on('data', look);
    child.stderr!.on('data', look);
    child.once('exit', (code) => reject(new Error(`${dir} ${script} exited (${code}): ${out.slice(-500)}`)));
  });
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const ms = (a: number[]) => a.map((x) => x.toFixed(3)).join(' ');

const ctx = await openBenchContext();
const servers: Array<{ name: string; url: string; child: ChildProcess }> = [];
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
  };
  const checks = { sessions: (j: any) => j.data?.sessions?.edges?.length === 50, events: (j: any) => j.data?.session?.events?.edges?.length === 100 };
  for (const dir of builds) servers.push({ name: dir, ...(await start(dir, 'src/main.ts', { DATABASE_URL: ctx.databaseUrl, PORT: '0' })) });
  // The raw baseline answers the events page with every field, whatever BENCH_EVENT_FIELDS says.
  servers.push({ name: 'raw', ...(await start(here, 'bench/raw-read-server.ts', { DATABASE_URL: ctx.databaseUrl })) });
  const postmaster = await postmasterOf(ctx.db.pool);
  const postgresMs = () => (postmaster === undefined ? NaN : processTotals((pid, _c, ppid) => pid === postmaster || ppid === postmaster).cpuMs);
  const cpu = new Map<string, number[]>();
  const pg = new Map<string, number[]>();
  for (const s of servers) for (const k of kinds) await hammer(s.url, bodies[k], { connections: 8, ms: 4 * windowMs, check: checks[k] }); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (const k of kinds) {
      for (const s of r % 2 ? [...servers].reverse() : servers) {
        const cpuBefore = processCpuSeconds(s.child.pid!);
        const pgBefore = postgresMs();
        const res = await hammer(s.url, bodies[k], { connections: 8, ms: windowMs, check: checks[k] });
        const key = `${k} ${s.name}`;
        cpu.set(key, [...(cpu.get(key) ?? []), ((processCpuSeconds(s.child.pid!) - cpuBefore) * 1000) / res.requests]);
        pg.set(key, [...(pg.get(key) ?? []), (postgresMs() - pgBefore) / res.requests]);
      }
    }
  }
  for (const k of kinds) {
    for (const s of servers) {
      const key = `${k} ${s.name}`;
      console.log(
        `${key}: server CPU ms/request median ${median(cpu.get(key)!).toFixed(3)} [${ms(cpu.get(key)!)}]; Postgres median ${median(pg.get(key)!).toFixed(3)}`,
      );
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
