// runner: external runner turns/s through GraphQL vs forkline's own runner on
// the same work (the scripted model: a clock call, then its answer), one
// forkline process each. The external runner is @forkline/runner (packages/runner) in this
// process, 100 sessions at a time (as forkline's own: FORKLINE_MAX_ACTIVE_SESSIONS),
// one append per step as the AI SDK adapter writes them. Rounds of each
// alternate in one server; the medians are compared.
// Goal (issue 32): external >= 0.5x forkline's own.
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { QUICK, round, type BenchContext } from './context.ts';
import { startServer, stop } from './turns.ts';

const SESSIONS = QUICK ? 40 : 300;
const ROUNDS = 3;
const MESSAGE = 'what time is it?\n!call clock';

async function gql(url: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  const body = (await res.json()) as { data?: any; errors?: unknown[] };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

async function answered(ctx: BenchContext, ids: string[]): Promise<void> {
  for (;;) {
    const { rows } = await ctx.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Session" WHERE id = ANY($1) AND "turnCount" = 1 AND status = 'IDLE' AND "pendingInputCount" = 0`,
      [ids],
    );
    if (rows[0].n === ids.length) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function turnsPerSecond(ctx: BenchContext, url: string, runner: string | null): Promise<number> {
  const ids: string[] = [];
  for (let i = 0; i < SESSIONS; i++) ids.push((await gql(url, `mutation($r: String) { createSession(input: {runner: $r}) { id } }`, { r: runner })).createSession.id);
  const start = performance.now();
  await Promise.all(ids.map((id) => gql(url, `mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: MESSAGE })));
  await answered(ctx, ids);
  return SESSIONS / ((performance.now() - start) / 1000);
}

/** What an agent writes for MESSAGE: a step calling the clock, its result, then a step answering. */
async function answer(session: RunnerSession): Promise<void> {
  for (;;) {
    const req = await session.modelRequest();
    if (req.turn == null) return;
    const { turn, inputId } = req;
    // One append per step, as the AI SDK adapter writes them (onStepFinish).
    await session.append([
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn, inputId } },
      { type: 'step/start', data: { turn, step: 1 } },
      { type: 'model/message', data: { turn, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{}' }] } },
      { type: 'tool/result', data: { turn, step: 1, callId: 'c1', resultId: `r_${session.sessionId}`, status: 'ok', content: new Date().toISOString(), name: 'clock' } },
      { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
    ]);
    await session.append([
      { type: 'step/start', data: { turn, step: 2 } },
      { type: 'model/message', data: { turn, step: 2, text: 'It is now.', toolCalls: [] } },
      { type: 'step/end', data: { turn, step: 2, reason: 'completed' } },
      { type: 'turn/end', data: { turn, reason: 'completed' } },
    ]);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function benchRunner(ctx: BenchContext) {
  const server = await startServer(ctx.databaseUrl);
  const runner = new ForklineRunner({ url: server.url, pool: 'bench', concurrency: 100 });
  const stopRunner = new AbortController();
  const running = runner.run(answer, { signal: stopRunner.signal });
  try {
    // Rounds alternate (own, external, own, …): a machine whose load drifts
    // weighs on both sides alike; each side's median is reported.
    const own: number[] = [];
    const external: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      own.push(await turnsPerSecond(ctx, server.url, null));
      external.push(await turnsPerSecond(ctx, server.url, 'bench'));
    }
    return {
      sessions: SESSIONS,
      rounds: ROUNDS,
      ownTurnsPerSec: round(median(own), 1),
      externalTurnsPerSec: round(median(external), 1),
      ratio: round(median(external) / median(own), 2),
      ratiosPerRound: external.map((e, i) => round(e / own[i], 2)).join(' '),
      goal: 'external >= 0.5x own',
    };
  } finally {
    stopRunner.abort();
    await running;
    await runner.close();
    await stop(server);
  }
}
