// turns: many sessions each sent one message (a tool call, then an answer) at
// once, served by 1 and by 2 forkline processes (real `src/main.ts` processes)
// on the same database. Reports turns/s, sendMessage p50/p99 and the peak
// number of connections the processes held (pg_stat_activity). Goals on a
// 2-core machine: 2 processes >= 1.0x one process, >= 150 turns/s on one,
// peak connections <= 2 x (DATABASE_POOL_MAX + 1); and 10,000 sessions on
// one process with the default pool (BENCH_QUICK=1: 200 and 2,000 sessions).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pgConfigFromUrl } from '../src/db/pg-config.ts';
import { percentile, QUICK, round, type BenchContext } from './context.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const POOL_MAX = 10;

interface Server {
  url: string;
  child: ChildProcess;
}

async function startServer(databaseUrl: string, extraEnv: Record<string, string> = {}): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: '0', LOG_LEVEL: 'info', DATABASE_POOL_MAX: String(POOL_MAX), ...extraEnv },
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

async function stop(s: Server) {
  if (s.child.exitCode !== null) return;
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
}

/** Like a client should: a 503 (SERVICE_UNAVAILABLE) is retried after its Retry-After; `retried` counts them. */
async function gql(url: string, query: string, variables: Record<string, unknown>, retried: { n: number }) {
  for (;;) {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
    const body = (await res.json()) as { data?: any; errors?: Array<{ message: string; extensions?: { code?: string } }> };
    if (res.status === 503) {
      retried.n++;
      await new Promise((r) => setTimeout(r, Number(res.headers.get('retry-after') ?? 1) * 1000));
      continue;
    }
    if (body.errors?.length) throw new Error(`${res.status} ${body.errors[0].extensions?.code}: ${body.errors[0].message}`);
    return body.data;
  }
}

async function run(ctx: BenchContext, processes: number, sessions: number) {
  const admin = new pg.Pool({ ...pgConfigFromUrl(ctx.databaseUrl), max: 2, application_name: 'forkline-bench' });
  const database = pgConfigFromUrl(ctx.databaseUrl).database;
  const ids: string[] = [];
  for (let i = 0; i < sessions; i += 500) {
    const { rows } = await admin.query<{ id: string }>(
      `INSERT INTO "Session" (id, "treeId", tenant, title)
       SELECT v, v, 'local', 'turns bench' FROM (SELECT 'ses_turns_' || replace(gen_random_uuid()::text, '-', '') AS v FROM generate_series(1, $1)) x
       RETURNING id`,
      [Math.min(500, sessions - i)],
    );
    ids.push(...rows.map((r) => r.id));
  }
  const servers = await Promise.all(Array.from({ length: processes }, () => startServer(ctx.databaseUrl)));
  let peak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND application_name <> 'forkline-bench'`,
        [database],
      );
      peak = Math.max(peak, rows[0].n);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    const sendTimes: number[] = [];
    const failures: string[] = [];
    const retried = { n: 0 };
    const t0 = performance.now();
    await Promise.all(
      ids.map(async (id, i) => {
        const t = performance.now();
        try {
          await gql(servers[i % processes].url, `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, {
            i: { sessionId: id, text: 'what time is it?\n!call clock' },
          }, retried);
        } catch (err) {
          failures.push(String(err));
        }
        sendTimes.push(performance.now() - t);
      }),
    );
    const accepted = performance.now() - t0;
    if (failures.length) throw new Error(`${failures.length} messages were refused: ${failures[0]}`);
    for (;;) {
      const { rows } = await admin.query<{ done: number }>(
        `SELECT count(*)::int AS done FROM "Session" WHERE id = ANY($1) AND "turnCount" = 1 AND status = 'IDLE' AND "pendingInputCount" = 0`,
        [ids],
      );
      if (rows[0].done === ids.length) break;
      if (performance.now() - t0 > 600_000) {
        const { rows: stuck } = await admin.query(
          `SELECT id, status, "turnCount", "pendingInputCount", "eventCount", "leaseOwner", "leaseExpiresAt" < now() AS "leaseExpired", "leaseToken"
             FROM "Session" WHERE id = ANY($1) AND NOT ("turnCount" = 1 AND status = 'IDLE' AND "pendingInputCount" = 0) LIMIT 3`,
          [ids],
        );
        for (const s of stuck) {
          const events = await admin.query(`SELECT seq, type FROM "Event" WHERE "sessionId" = $1 ORDER BY seq`, [s.id]);
          console.error('stuck session', JSON.stringify(s), events.rows.map((e) => `${e.seq}:${e.type}`).join(' '));
        }
        throw new Error(`only ${rows[0].done} of ${ids.length} turns done after 600 s`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const elapsed = performance.now() - t0;
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
    };
  } finally {
    sampling = false;
    await sampler;
    await Promise.all(servers.map(stop));
    await admin.end();
  }
}

export async function benchTurns(ctx: BenchContext) {
  const sessions = QUICK ? 200 : 1_000;
  const one = await run(ctx, 1, sessions);
  const two = await run(ctx, 2, sessions);
  const many = await run(ctx, 1, QUICK ? 2_000 : 10_000);
  return {
    sessions,
    oneProcessTurnsPerSec: one.turnsPerSec,
    twoProcessTurnsPerSec: two.turnsPerSec,
    ratioTwoToOne: round(two.turnsPerSec / one.turnsPerSec),
    oneSendP50Ms: one.sendP50Ms,
    oneSendP99Ms: one.sendP99Ms,
    twoSendP50Ms: two.sendP50Ms,
    twoSendP99Ms: two.sendP99Ms,
    onePeakConnections: one.peakConnections,
    twoPeakConnections: two.peakConnections,
    sendRetries503: one.sendRetries + two.sendRetries + many.sendRetries,
    manySessions: QUICK ? 2_000 : 10_000,
    manyTurnsPerSec: many.turnsPerSec,
    manyPeakConnections: many.peakConnections,
    manyCompleted: many.completedTurns,
    goal: `2 processes >= 1.0x one; >= 150 turns/s on one; peak connections <= ${2 * (POOL_MAX + 1)}; every turn completed`,
  };
}
