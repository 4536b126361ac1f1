// turns: many sessions each sent one message (a tool call, then an answer) at
// once, served by 1 and by 2 forkline processes (real `src/main.ts` processes)
// on the same database. Reports turns/s, sendMessage p50/p99 and the peak
// number of connections the processes held (pg_stat_activity). Goals on a
// 2-core machine: 2 processes >= 1.0x one process, >= 150 turns/s on one,
// peak connections <= 2 x (DATABASE_POOL_MAX + 1); and 10,000 sessions on
// one process with the default pool (BENCH_QUICK=1: 200 and 2,000 sessions).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { APPLICATION_NAME, pgConfigFromUrl } from '../src/db/pg-config.ts';
import { COUNTS, percentile, QUICK, round, type BenchContext } from './context.ts';

/**
 * CPU time (user + system, ms) and context switches (voluntary and not) of the
 * processes matching `match`, from /proc (Linux); NaN elsewhere. With `reaper`
 * (a postmaster), that process's children that ended and were reaped count too
 * (its cutime + cstime): a backend or autovacuum worker that exits inside a
 * measured window would otherwise take its CPU out of the sum (a window's
 * Postgres CPU came out negative).
 */
export function processTotals(match: (pid: number, comm: string, ppid: number) => boolean, reaper?: number): { cpuMs: number; switches: number } {
  if (!fs.existsSync('/proc/self/stat')) return { cpuMs: NaN, switches: NaN };
  const tick = 1000 / 100; // USER_HZ is 100 on Linux
  const total = { cpuMs: 0, switches: 0 };
  for (const name of fs.readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (!match(pid, comm, Number(fields[1]))) continue;
      total.cpuMs += (Number(fields[11]) + Number(fields[12])) * tick;
      if (pid === reaper) total.cpuMs += (Number(fields[13]) + Number(fields[14])) * tick;
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)) total.switches += Number(m[1]);
    } catch {
      // the process ended meanwhile
    }
  }
  return total;
}

/** CPU time (ns) every thread of `pid` has used so far: /proc/<pid>/task/<tid>/schedstat, finer than /proc/<pid>/stat's ticks. */
export function threadsCpuNs(pid: number): number {
  let ns = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns;
}

/** The pid of the postmaster serving `admin`, when it runs on this machine (its backend's parent); undefined otherwise. */
export async function postmasterOf(admin: pg.Pool): Promise<number | undefined> {
  const { rows } = await admin.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  try {
    const stat = fs.readFileSync(`/proc/${rows[0].pid}/stat`, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    return comm.startsWith('postgres') ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) : undefined;
  } catch {
    return undefined; // another machine's (or no /proc)
  }
}

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const POOL_MAX = 10;

/**
 * What the database's statements did so far (pg_stat_statements, when the
 * server loads it): executions, execution ms, buffer accesses and WAL records;
 * undefined without it. Deltas over the timed window are the run's per-turn
 * statement figures (the load generator's own polling included, as in its CPU).
 */
export async function statementTotals(admin: pg.Pool) {
  try {
    const { rows } = await admin.query<{ calls: string; appends: string; ms: number; buffers: string; wal: string }>(
      `SELECT sum(calls) AS calls, sum(calls) FILTER (WHERE query LIKE 'WITH s0 AS%') AS appends, sum(total_exec_time) AS ms,
              sum(shared_blks_hit + shared_blks_read + local_blks_hit + local_blks_read) AS buffers, sum(wal_records) AS wal
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    return {
      calls: Number(rows[0].calls),
      appends: Number(rows[0].appends),
      ms: Number(rows[0].ms),
      buffers: Number(rows[0].buffers),
      wal: Number(rows[0].wal),
    };
  } catch {
    return undefined; // not loaded, or the extension not created in this database
  }
}

/** Where the database's WAL insertion has got to: the bytes between two of them are what was written between (every process's). */
async function walPosition(admin: pg.Pool): Promise<string> {
  const { rows } = await admin.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
  return rows[0].lsn;
}

async function walBytesBetween(admin: pg.Pool, from: string, to: string): Promise<number> {
  const { rows } = await admin.query<{ bytes: string }>('SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn) AS bytes', [from, to]);
  return Number(rows[0].bytes);
}

/** Rows inserted, updated and HOT-updated in "Session" and "Event" so far (pg_stat_user_tables). */
async function rowTotals(admin: pg.Pool) {
  const { rows } = await admin.query<{ relname: string; ins: string; upd: string; hot: string }>(
    `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname IN ('Session', 'Event')`,
  );
  const of = (name: string) => {
    const r = rows.find((x) => x.relname === name);
    return { ins: Number(r?.ins ?? 0), upd: Number(r?.upd ?? 0), hot: Number(r?.hot ?? 0) };
  };
  return { session: of('Session'), event: of('Event') };
}

/**
 * A backend sends its table counters to pg_stat_user_tables at most once a
 * second while busy and within 10 s once idle (Postgres's cumulative
 * statistics): read right after the warm-up or the window, they would leave
 * part of it out or count part of the warm-up in. BENCH_COUNTS waits this long
 * on each side of the window, outside the timed part.
 */
const STATS_SETTLE_MS = 11_000;

interface Server {
  url: string;
  child: ChildProcess;
}

/** `checkout`: another checkout whose `src/main.ts` to run (with its own tsx), as bench/turn-alternation.ts does; default this one. */
export async function startServer(databaseUrl: string, extraEnv: Record<string, string> = {}, checkout?: string): Promise<Server> {
  // BENCH_NODE_ARGS: extra node flags for the servers, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', checkout ? 'src/main.ts' : MAIN], {
    ...(checkout ? { cwd: checkout } : {}),
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: '0',
      LOG_LEVEL: 'info',
      DATABASE_POOL_MAX: String(POOL_MAX),
      // The load generator is one address sending up to 10,000 messages at once: the per-address
      // connection cap (1024 by default, for untrusted clients: docs/operations.md "Threat model") is off.
      FORKLINE_MAX_CONNECTIONS_PER_ADDRESS: '0',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c;
      const m = /"url":"([^"]+)"/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`server exited (${code}): ${out.slice(-500)}`)));
  });
  child.stdout!.resume();
  return { url, child };
}

export async function stop(s: Server) {
  if (s.child.exitCode !== null) return;
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
}

/**
 * Keep-alive connections through node:http, not fetch: the load generator's
 * CPU is counted on the same 2 cores as the servers', and fetch (undici's
 * Request, Response, headers and body streams per request) cost it about twice
 * node:http's per message.
 */
const AGENT = new http.Agent({ keepAlive: true, maxSockets: Infinity });

/** POSTs `body` (JSON) to `url`: the status, the Retry-After header and the body. */
function post(url: URL, body: string): Promise<{ status: number; retryAfter?: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', agent: AGENT, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], text }));
        res.on('error', reject);
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      // A kept-alive connection the server closed as it idled, just as it was reused: the request never reached it.
      if (req.reusedSocket && err.code === 'ECONNRESET') post(url, body).then(resolve, reject);
      else reject(err);
    });
    req.end(body);
  });
}

/** Like a client should: a 503 (SERVICE_UNAVAILABLE) is retried after its Retry-After; `retried` counts them. */
async function gql(url: URL, query: string, variables: Record<string, unknown>, retried: { n: number }) {
  for (;;) {
    const res = await post(url, JSON.stringify({ query, variables }));
    const body = JSON.parse(res.text) as { data?: any; errors?: Array<{ message: string; extensions?: { code?: string } }> };
    if (res.status === 503) {
      retried.n++;
      await new Promise((r) => setTimeout(r, Number(res.retryAfter ?? 1) * 1000));
      continue;
    }
    if (body.errors?.length) throw new Error(`${res.status} ${body.errors[0].extensions?.code}: ${body.errors[0].message}`);
    return body.data;
  }
}

export async function createSessions(admin: pg.Pool, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 500) {
    const { rows } = await admin.query<{ id: string }>(
      `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title)
       SELECT v, v, 'local', 'turns bench' FROM (SELECT 'ses_turns_' || replace(gen_random_uuid()::text, '-', '') AS v FROM generate_series(1, $1)) x
       RETURNING id, "treeId")
       INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s RETURNING id`,
      [Math.min(500, n - i)],
    );
    ids.push(...rows.map((r) => r.id));
  }
  return ids;
}

const SEND = `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`;
export const MESSAGE = 'what time is it?\n!call clock';
/**
 * The same turn with a model that takes its time, as real ones do: the answer
 * streams a word every 100 ms (about 0.9 s per turn). Turns then wait on the
 * model, not on the CPU, and a process runs at most its
 * FORKLINE_MAX_ACTIVE_SESSIONS (100) at once: what a second process adds there.
 */
const SLOW_MESSAGE = 'what time is it?\n!call clock\n!slow 100';

/**
 * Ids checked per look while they are answered in send order: the poll's own
 * statements run in the Postgres whose CPU per turn is measured. Checking all
 * 1,000 ids every 50 ms (a pkey probe each) cost Postgres 0.2–0.6 ms a turn of
 * the 1.6–1.9 measured; a look at the oldest unanswered CHECK_CHUNK, and at
 * the next ones only once those are all answered, costs a tenth of that and
 * sees the last turn end as soon (answers come about in send order: sessions
 * are claimed oldest first).
 */
const CHECK_CHUNK = 100;

export async function waitAnswered(admin: pg.Pool, ids: string[], since: number) {
  const remaining = [...ids];
  for (;;) {
    while (remaining.length) {
      const chunk = remaining.slice(0, CHECK_CHUNK);
      // Each id probes the key. Written as `id = ANY($1)`, Postgres 18 planned a skip scan of (tenant, createdAt, id)
      // (the key is (id, treeId)), one descent per creation time: a backend's CPU per look of 100 ids 0.75 ms against
      // 0.5 with ids made together (56,000 sessions), 7.3 against 0.8 with ids spread over the table (20,000).
      const { rows } = await admin.query<{ id: string }>(
        `SELECT s.id FROM unnest($1::text[]) AS u(id) JOIN "Session" s ON s.id = u.id
          WHERE s."turnCount" = 1 AND s.status = 'IDLE' AND s."pendingInputCount" = 0`,
        [chunk],
      );
      const answered = new Set(rows.map((r) => r.id));
      for (let i = remaining.length - 1; i >= 0; i--) if (answered.has(remaining[i])) remaining.splice(i, 1);
      if (answered.size < chunk.length) break;
    }
    if (remaining.length === 0) return;
    if (performance.now() - since > 600_000) {
      const { rows: stuck } = await admin.query(
        `SELECT id, status, "turnCount", "pendingInputCount", "eventCount", "leaseOwner", "leaseExpiresAt" < now() AS "leaseExpired", "leaseToken"
           FROM "Session" WHERE id = ANY($1) LIMIT 3`,
        [remaining],
      );
      for (const s of stuck) {
        const events = await admin.query(`SELECT seq, type FROM "Event" WHERE "sessionId" = $1 ORDER BY seq`, [s.id]);
        console.error('stuck session', JSON.stringify(s), events.rows.map((e) => `${e.seq}:${e.type}`).join(' '));
      }
      throw new Error(`only ${ids.length - remaining.length} of ${ids.length} turns done after 600 s`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Each process first serves WARMUP_TURNS turns of its own, untimed: a fresh
 * Node process spends its first few thousand turns compiling (V8's JIT), and
 * two fresh processes pay that twice on the same cores, which would count
 * against the two-process figure a fixed start-up cost, not what a second
 * process adds. Measured with --trace-opt: V8 optimizes about 450 functions of
 * the turn's path, 100–150 a second over the first ~4,000 turns and 20 a
 * second after 3,000; that compiling runs on V8's background threads, which
 * took a third of a server's CPU in the timed window after 200 warm-up turns
 * (0.41–0.45 of 1.2 ms a turn). After 200, one process ran 450–510 turns/s
 * and two 410–430; after 3,000, 810–820 and 830–880.
 */
export const WARMUP_TURNS = QUICK ? 200 : 3_000;

/**
 * Sends in flight at most (each its own connection): the 1,000-session runs
 * send everything at once; the 10,000-session run keeps 4,000 going. A process
 * accepts one connection per event-loop iteration, and 10,000 connecting at
 * once overflow its accept queue (server.ts LISTEN_BACKLOG, 4,096): with
 * Postgres's synchronous_commit off, 426–626 were reset. A load balancer or a
 * client's connection pool keeps far fewer; the sessions are what is measured.
 */
const MAX_IN_FLIGHT = 4_000;

/** Sends each session its message, spread over the servers at `urls`; returns each send's time (ms). */
export async function sendMessages(urls: URL[], sessionIds: string[], text: string, retried: { n: number }): Promise<number[]> {
  const times: number[] = [];
  const failures: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(sessionIds.length, MAX_IN_FLIGHT) }, async () => {
      while (next < sessionIds.length) {
        const i = next++;
        const t = performance.now();
        try {
          await gql(urls[i % urls.length], SEND, { i: { sessionId: sessionIds[i], text } }, retried);
        } catch (err) {
          const cause = (err as Error).cause as Error | undefined;
          failures.push(cause ? `${err}: ${cause.message}` : String(err));
        }
        times.push(performance.now() - t);
      }
    }),
  );
  if (failures.length) throw new Error(`${failures.length} of ${sessionIds.length} messages were refused (${urls.length} processes): ${failures[0]}`);
  return times;
}

/**
 * Every run starts from the same state: the earlier runs' dead rows vacuumed
 * and their writes checkpointed. Otherwise autovacuum and checkpoints of what
 * earlier runs wrote land inside later runs, unevenly: over a bench's rounds
 * the one-process figure rose and the two-process one fell (two processes
 * keep the machine ~96% busy and absorb none of it; one leaves ~13% idle).
 */
export async function quiesce(admin: pg.Pool) {
  await admin.query('VACUUM (ANALYZE) "Session", "Event"');
  await admin.query('CHECKPOINT').catch(() => {}); // superuser or pg_checkpoint only: skipped otherwise
}

/** `serverEnv`: more of the servers' environment (bench/scale-out.ts puts them behind PgBouncer). */
export async function runTurns(
  ctx: BenchContext,
  processes: number,
  sessions: number,
  poolMax = POOL_MAX,
  message = MESSAGE,
  serverEnv: Record<string, string> = {},
) {
  const admin = new pg.Pool({ ...pgConfigFromUrl(ctx.databaseUrl), max: 2, application_name: 'forkline-bench' });
  const database = pgConfigFromUrl(ctx.databaseUrl).database;
  const warmup = await createSessions(admin, WARMUP_TURNS * processes);
  const ids = await createSessions(admin, sessions);
  await quiesce(admin);
  const servers = await Promise.all(
    Array.from({ length: processes }, () => startServer(ctx.databaseUrl, { DATABASE_POOL_MAX: String(poolMax), ...serverEnv })),
  );
  let peak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND application_name = $2`,
        [database, APPLICATION_NAME],
      );
      peak = Math.max(peak, rows[0].n);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    const urls = servers.map((sv) => new URL(sv.url));
    const sendAll = (sessionIds: string[], text: string, retried: { n: number }) => sendMessages(urls, sessionIds, text, retried);
    await sendAll(warmup, MESSAGE, { n: 0 });
    await waitAnswered(admin, warmup, performance.now());
    // Statistics with the warm-up's events in them. quiesce's ANALYZE saw a fresh database's "Event" empty, and a
    // plan the servers' connections cached then (a generic plan, after five runs) read a session's events by
    // scanning the whole table and sorting, for every turn of the timed run: most of a turn's buffer accesses.
    // A real database's tables are not empty (and autovacuum's ANALYZE, a minute later, replans them too).
    await admin.query('ANALYZE "Session", "Event"');
    const retried = { n: 0 };
    const serverPids = new Set(servers.map((sv) => sv.child.pid));
    // The database's own postmaster and its children (backends, WAL writer, checkpointer…) when it runs on this
    // machine: other Postgres servers here (other work's) are not this run's. Elsewhere: every process named postgres.
    const postmaster = await postmasterOf(admin);
    const isOurPostgres = (pid: number, comm: string, ppid: number) => (postmaster ? pid === postmaster || ppid === postmaster : comm.startsWith('postgres'));
    const cpu = () => ({
      servers: processTotals((pid) => serverPids.has(pid)),
      postgres: processTotals(isOurPostgres, postmaster),
      bench: processTotals((pid) => pid === process.pid),
    });
    if (COUNTS) await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
    const rows0 = COUNTS ? await rowTotals(admin) : undefined;
    const statements0 = await statementTotals(admin);
    const wal0 = await walPosition(admin);
    const cpu0 = cpu();
    const t0 = performance.now();
    const sendTimes = await sendAll(ids, message, retried);
    const accepted = performance.now() - t0;
    await waitAnswered(admin, ids, t0);
    const elapsed = performance.now() - t0;
    const cpu1 = cpu();
    const wal1 = await walPosition(admin);
    const statements1 = await statementTotals(admin);
    if (COUNTS) await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
    const rows1 = COUNTS ? await rowTotals(admin) : undefined;
    sendTimes.sort((a, b) => a - b);
    const answered = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = ANY($1) AND type = 'turn/end' AND data->>'reason' = 'completed'`,
      [ids],
    );
    return {
      turnsPerSec: round((sessions / elapsed) * 1000, 1),
      seconds: round(elapsed / 1000, 2),
      acceptSeconds: round(accepted / 1000, 2),
      sendP50Ms: round(percentile(sendTimes, 50)),
      sendP99Ms: round(percentile(sendTimes, 99)),
      sendRetries: retried.n,
      completedTurns: answered.rows[0].n,
      peakConnections: peak,
      // Where the CPU went, per turn: the forkline processes, Postgres, and this load generator.
      serverCpuMsPerTurn: round((cpu1.servers.cpuMs - cpu0.servers.cpuMs) / sessions),
      postgresCpuMsPerTurn: round((cpu1.postgres.cpuMs - cpu0.postgres.cpuMs) / sessions),
      loadCpuMsPerTurn: round((cpu1.bench.cpuMs - cpu0.bench.cpuMs) / sessions),
      // pg_stat_statements over the window, per turn (undefined without it): statements, their execution ms, buffer accesses, WAL records.
      postgresStatementsPerTurn:
        statements0 && statements1
          ? {
              calls: round((statements1.calls - statements0.calls) / sessions, 2),
              appendStatements: round((statements1.appends - statements0.appends) / sessions, 2),
              execMs: round((statements1.ms - statements0.ms) / sessions, 3),
              buffers: round((statements1.buffers - statements0.buffers) / sessions, 1),
              walRecords: round((statements1.wal - statements0.wal) / sessions, 1),
            }
          : undefined,
      // WAL the database wrote over the window, per turn (its checkpoints' and autovacuum's too, when they ran then).
      walBytesPerTurn: Math.round((await walBytesBetween(admin, wal0, wal1)) / sessions),
      // BENCH_COUNTS: rows written per turn; a Session update that is HOT writes no index entry.
      rowsPerTurn:
        rows0 && rows1
          ? {
              eventInserts: round((rows1.event.ins - rows0.event.ins) / sessions, 2),
              sessionUpdates: round((rows1.session.upd - rows0.session.upd) / sessions, 2),
              sessionHotUpdates: round((rows1.session.hot - rows0.session.hot) / sessions, 2),
            }
          : undefined,
      // How much of the machine those three kept busy: near 100%, a second process can only share it.
      busyPercent: round(
        (100 * (cpu1.servers.cpuMs - cpu0.servers.cpuMs + cpu1.postgres.cpuMs - cpu0.postgres.cpuMs + cpu1.bench.cpuMs - cpu0.bench.cpuMs)) /
          (elapsed * os.availableParallelism()),
        0,
      ),
      // How often the servers and the backends (main threads) slept and were woken, or were preempted, per turn.
      serverSwitchesPerTurn: round((cpu1.servers.switches - cpu0.servers.switches) / sessions, 1),
      postgresSwitchesPerTurn: round((cpu1.postgres.switches - cpu0.postgres.switches) / sessions, 1),
    };
  } finally {
    sampling = false;
    await sampler;
    await Promise.all(servers.map(stop));
    await admin.end();
  }
}

/**
 * One run of each is a window of about 3 s, and on this 2-core machine the
 * same code measured 0.84–1.07× from one pair of runs to the next (background
 * work: autovacuum, checkpoints). So one and two processes run in alternation,
 * ROUNDS times, and each figure is the median run's.
 */
const ROUNDS = QUICK ? 1 : 3;

type Run = Awaited<ReturnType<typeof runTurns>>;

/** What the database did per turn of a run: WAL bytes always; statements with pg_stat_statements; rows with BENCH_COUNTS. */
function databasePerTurn(run: Run): string {
  const st = run.postgresStatementsPerTurn;
  const rows = run.rowsPerTurn;
  return [
    `WAL ${run.walBytesPerTurn} B`,
    st ? `statements ${st.calls} (appends ${st.appendStatements}), WAL records ${st.walRecords}, buffers ${st.buffers}` : undefined,
    rows ? `Session updates ${rows.sessionUpdates} (HOT ${rows.sessionHotUpdates}), Event rows ${rows.eventInserts}` : undefined,
  ]
    .filter(Boolean)
    .join('; ');
}
const median = (runs: Run[]): Run => [...runs].sort((a, b) => a.turnsPerSec - b.turnsPerSec)[Math.floor(runs.length / 2)];

export async function benchTurns(ctx: BenchContext) {
  const sessions = QUICK ? 200 : 1_000;
  const ones: Run[] = [];
  const twos: Run[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    ones.push(await runTurns(ctx, 1, sessions));
    twos.push(await runTurns(ctx, 2, sessions));
  }
  const [one, two] = [median(ones), median(twos)];
  // The same two processes sharing one process's connections (half the pool each): on a small
  // Postgres, more backends cost CPU per statement, so the database's budget is better split.
  const twoShared = await runTurns(ctx, 2, sessions, POOL_MAX / 2);
  const many = await runTurns(ctx, 1, QUICK ? 2_000 : 10_000);
  const slowOne = await runTurns(ctx, 1, sessions, POOL_MAX, SLOW_MESSAGE);
  const slowTwo = await runTurns(ctx, 2, sessions, POOL_MAX, SLOW_MESSAGE);
  return {
    sessions,
    oneProcessTurnsPerSec: one.turnsPerSec,
    twoProcessTurnsPerSec: two.turnsPerSec,
    ratioTwoToOne: round(two.turnsPerSec / one.turnsPerSec),
    roundsOneTwo: ones.map((o, i) => `${o.turnsPerSec}/${twos[i].turnsPerSec} (${round(twos[i].turnsPerSec / o.turnsPerSec)})`).join(', '),
    twoSharedPoolTurnsPerSec: twoShared.turnsPerSec,
    ratioTwoSharedPoolToOne: round(twoShared.turnsPerSec / one.turnsPerSec),
    oneSendP50Ms: one.sendP50Ms,
    oneSendP99Ms: one.sendP99Ms,
    twoSendP50Ms: two.sendP50Ms,
    twoSendP99Ms: two.sendP99Ms,
    onePeakConnections: Math.max(...ones.map((o) => o.peakConnections)),
    oneCpuMsPerTurn: `server ${one.serverCpuMsPerTurn}, postgres ${one.postgresCpuMsPerTurn}, load ${one.loadCpuMsPerTurn} (machine ${one.busyPercent}% busy)`,
    twoCpuMsPerTurn: `servers ${two.serverCpuMsPerTurn}, postgres ${two.postgresCpuMsPerTurn}, load ${two.loadCpuMsPerTurn} (machine ${two.busyPercent}% busy)`,
    oneDatabasePerTurn: databasePerTurn(one),
    twoDatabasePerTurn: databasePerTurn(two),
    contextSwitchesPerTurn: `one: server ${one.serverSwitchesPerTurn}, postgres ${one.postgresSwitchesPerTurn}; two: servers ${two.serverSwitchesPerTurn}, postgres ${two.postgresSwitchesPerTurn}`,
    twoPeakConnections: Math.max(...twos.map((t) => t.peakConnections)),
    twoSharedPoolPeakConnections: twoShared.peakConnections,
    sendRetries503: [...ones, ...twos, many].reduce((n, r) => n + r.sendRetries, 0),
    manySessions: QUICK ? 2_000 : 10_000,
    manyTurnsPerSec: many.turnsPerSec,
    manyPeakConnections: many.peakConnections,
    manyCompleted: many.completedTurns,
    // Turns that wait on the model (SLOW_MESSAGE): the case a second process is for.
    slowModelOneProcessTurnsPerSec: slowOne.turnsPerSec,
    slowModelTwoProcessTurnsPerSec: slowTwo.turnsPerSec,
    slowModelRatioTwoToOne: round(slowTwo.turnsPerSec / slowOne.turnsPerSec),
    slowModelCompleted: slowOne.completedTurns + slowTwo.completedTurns,
    goal: `2 processes >= 1.0x one; >= 150 turns/s on one; peak connections <= ${2 * (POOL_MAX + 1)}; every turn completed`,
  };
}
