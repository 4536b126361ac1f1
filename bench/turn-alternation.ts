// `npm run bench:turn-alternation`: the `turns` bench's window (1,000 sessions
// sent one tool-call message each at once, one forkline process or more, timed until
// every turn ended) served by several builds in turn, round after round, the
// builds' order rotated every round. On a loaded machine whole-bench runs
// minutes apart differ by 20–30%; windows of a few seconds, interleaved, see
// the same load. Each build runs `src/main.ts` of its checkout (BENCH_PROCESSES, one by default), warmed up
// once (bench/turns.ts WARMUP_TURNS) and kept for every round, on its own
// database of one Postgres (a message's append claims its session for the
// process that has room: a second build on the same tables would take
// another's turns), and only the measured build is sent anything in a window.
// Prints per build and round: turns/s, server CPU per turn (every thread's
// schedstat), Postgres CPU per turn (its postmaster and children, /proc), the
// load generator's, "Session" row updates and how many were HOT (pg_stat_user_tables); then medians, ranges, and each round's ratio to the first
// build. With `pg_stat_statements` loaded (BENCH_DATABASE_URL at a Postgres
// started with it), also statements, execution ms, buffers and WAL records a turn.
//
//   BENCH_BUILDS=/path/to/base,/path/to/this  (checkouts with `npm ci` done; default: this one; a checkout may be
//                named twice, to see the run's spread between two processes of one build)
//   BENCH_ROUNDS=10  BENCH_SESSIONS=1000  BENCH_WARMUP=3000 (turns each server runs untimed first)
//   BENCH_PROCESSES=2  (processes per build, on its database, the messages spread over them; their CPU summed)
//   BENCH_BUILD_ENV='FORKLINE_X=1,'  (environment per build, in BENCH_BUILDS' order, space-separated NAME=value)
//   BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/p'  (node flags for every server; profiles are written when they stop)
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pgConfigFromUrl } from '../src/db/pg-config.ts';
import { ensureDatabase } from '../src/db/migrate.ts';
import { openBenchContext, round } from './context.ts';
import {
  MESSAGE,
  WARMUP_TURNS,
  createSessions,
  postmasterOf,
  processTotals,
  quiesce,
  sendMessages,
  startServer,
  statementTotals,
  stop,
  threadsCpuNs,
  waitAnswered,
} from './turns.ts';

const here = fileURLToPath(new URL('..', import.meta.url));
const builds = process.env.BENCH_BUILDS?.split(',').filter(Boolean) ?? [here];
const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const sessions = Number(process.env.BENCH_SESSIONS ?? 1000);
const warmupTurns = Number(process.env.BENCH_WARMUP ?? WARMUP_TURNS);
const processes = Number(process.env.BENCH_PROCESSES ?? 1);
const buildEnv = (process.env.BENCH_BUILD_ENV ?? '').split(',').map((e) => e.split(' ').filter(Boolean));

interface Window {
  turnsPerSec: number;
  serverMs: number;
  postgresMs: number;
  loadMs: number;
  statements?: { calls: number; execMs: number; buffers: number; wal: number };
  /** Updates of "Session" rows a turn, and how many were HOT (pg_stat_user_tables; a backend reports within about a second). */
  sessionUpdates: number;
  hotUpdates: number;
}

/** "Session"'s updates so far and the HOT ones among them. */
async function sessionUpdateTotals(admin: pg.Pool) {
  await admin.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await admin.query<{ upd: string; hot: string }>(
    `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'Session'`,
  );
  return { upd: Number(rows[0]?.upd ?? 0), hot: Number(rows[0]?.hot ?? 0) };
}

const urlsOf = (s: { servers: Array<{ url: string }> }) => s.servers.map((sv) => new URL(sv.url));
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const spread = (a: number[], digits: number) => `median ${median(a).toFixed(digits)} (${Math.min(...a).toFixed(digits)}–${Math.max(...a).toFixed(digits)})`;

const ctx = await openBenchContext();
const sides: Array<{ name: string; admin: pg.Pool; servers: Array<Awaited<ReturnType<typeof startServer>>>; windows: Window[] }> = [];
try {
  for (const [i, dir] of builds.entries()) {
    // Each build its own database in the same Postgres (migrated by its server at start).
    const url = new URL(ctx.databaseUrl);
    url.pathname = `/forkline_turn_alt_${i}`;
    await ensureDatabase(url.toString());
    const admin = new pg.Pool({ ...pgConfigFromUrl(url.toString()), max: 2, application_name: 'forkline-bench' });
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements').catch(() => {}); // only where the server loads it
    const env = Object.fromEntries((buildEnv[i] ?? []).map((v) => [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)]));
    const servers = [];
    for (let p = 0; p < processes; p++) servers.push(await startServer(url.toString(), env, dir)); // one at a time: one migrates
    sides.push({ name: [dir, ...(buildEnv[i] ?? [])].join(' '), admin, servers, windows: [] });
  }
  // Warm-ups one after the other, so that no server compiles while another is measured.
  for (const s of sides) {
    const ids = await createSessions(s.admin, warmupTurns);
    await sendMessages(urlsOf(s), ids, MESSAGE, { n: 0 });
    await waitAnswered(s.admin, ids, performance.now());
    await s.admin.query('ANALYZE "Session", "Event"'); // statistics with events in them (bench/turns.ts says why)
  }
  const postmaster = await postmasterOf(ctx.db.pool);
  const postgresMs = () =>
    processTotals((pid, comm, ppid) => (postmaster ? pid === postmaster || ppid === postmaster : comm.startsWith('postgres')), postmaster).cpuMs;
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < sides.length; k++) {
      const s = sides[(k + r) % sides.length];
      const ids = await createSessions(s.admin, sessions);
      await quiesce(s.admin);
      const serversNs = () => s.servers.reduce((ns, sv) => ns + threadsCpuNs(sv.child.pid!), 0);
      const statements0 = await statementTotals(s.admin);
      const updates0 = await sessionUpdateTotals(s.admin);
      const [server0, postgres0, load0] = [serversNs(), postgresMs(), process.cpuUsage()];
      const t0 = performance.now();
      await sendMessages(urlsOf(s), ids, MESSAGE, { n: 0 });
      await waitAnswered(s.admin, ids, t0);
      const elapsed = performance.now() - t0;
      const [server1, postgres1, load1] = [serversNs(), postgresMs(), process.cpuUsage(load0)];
      const statements1 = await statementTotals(s.admin);
      await new Promise((r) => setTimeout(r, 1500)); // the servers' backends report their counts at most once a second
      const updates1 = await sessionUpdateTotals(s.admin);
      const w: Window = {
        turnsPerSec: (sessions / elapsed) * 1000,
        serverMs: (server1 - server0) / 1e6 / sessions,
        postgresMs: (postgres1 - postgres0) / sessions,
        loadMs: (load1.user + load1.system) / 1000 / sessions,
        sessionUpdates: (updates1.upd - updates0.upd) / sessions,
        hotUpdates: (updates1.hot - updates0.hot) / sessions,
        ...(statements0 && statements1
          ? {
              statements: {
                calls: (statements1.calls - statements0.calls) / sessions,
                execMs: (statements1.ms - statements0.ms) / sessions,
                buffers: (statements1.buffers - statements0.buffers) / sessions,
                wal: (statements1.wal - statements0.wal) / sessions,
              },
            }
          : {}),
      };
      s.windows.push(w);
      const st = w.statements;
      console.log(
        `round ${r + 1} ${s.name}: ${w.turnsPerSec.toFixed(0)} turns/s, CPU ms a turn server ${w.serverMs.toFixed(3)} Postgres ${w.postgresMs.toFixed(3)} load ${w.loadMs.toFixed(3)}; Session updates ${w.sessionUpdates.toFixed(2)} (HOT ${w.hotUpdates.toFixed(2)})` +
          (st ? `; statements ${st.calls.toFixed(2)}, exec ms ${st.execMs.toFixed(3)}, buffers ${st.buffers.toFixed(0)}, WAL ${st.wal.toFixed(1)}` : ''),
      );
    }
  }
  const results: Record<string, unknown> = { rounds, sessions, warmupTurns, processes };
  for (const s of sides) {
    const of = (f: (w: Window) => number) => s.windows.map(f);
    results[s.name] = {
      turnsPerSec: spread(
        of((w) => w.turnsPerSec),
        0,
      ),
      serverCpuMsPerTurn: spread(
        of((w) => w.serverMs),
        3,
      ),
      postgresCpuMsPerTurn: spread(
        of((w) => w.postgresMs),
        3,
      ),
      loadCpuMsPerTurn: spread(
        of((w) => w.loadMs),
        3,
      ),
      sessionUpdatesPerTurn: spread(
        of((w) => w.sessionUpdates),
        2,
      ),
      hotUpdatesPerTurn: spread(
        of((w) => w.hotUpdates),
        2,
      ),
      ...(s.windows[0].statements
        ? {
            statementsPerTurn: spread(
              of((w) => w.statements!.calls),
              2,
            ),
            execMsPerTurn: spread(
              of((w) => w.statements!.execMs),
              3,
            ),
            buffersPerTurn: spread(
              of((w) => w.statements!.buffers),
              0,
            ),
            walRecordsPerTurn: spread(
              of((w) => w.statements!.wal),
              1,
            ),
          }
        : {}),
    };
  }
  // Each round's ratio to the first build (the rounds' load moves both alike): how often, and by how much, a build differs.
  const first = sides[0].windows;
  for (const s of sides.slice(1)) {
    const ratios = (f: (w: Window) => number) => {
      const rs = s.windows.map((w, i) => f(w) / f(first[i]));
      return `${spread(rs, 3)}, lower in ${rs.filter((x) => x < 1).length} of ${rs.length} [${rs.map((x) => round(x)).join(' ')}]`;
    };
    results[`${s.name} / ${sides[0].name}`] = {
      turnsPerSec: ratios((w) => w.turnsPerSec),
      serverCpu: ratios((w) => w.serverMs),
      postgresCpu: ratios((w) => w.postgresMs),
    };
  }
  console.log(JSON.stringify(results, null, 2));
} finally {
  await Promise.all(sides.flatMap((s) => s.servers.map(stop)));
  await Promise.all(sides.map((s) => s.admin.end()));
  await ctx.close();
}
