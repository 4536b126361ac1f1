// runner: external runner turns/s through GraphQL vs forkline's own runner on
// the same work (the scripted model: a clock call, then its answer), one
// forkline process each. The external runner is @forkline/runner (packages/runner) in this
// process, 100 sessions at a time (as forkline's own: FORKLINE_MAX_ACTIVE_SESSIONS),
// each step written in two parts as the adapters write them. Rounds of each
// alternate in one server; the medians are compared.
// Goal: external >= 0.5x forkline's own.
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
  for (let i = 0; i < SESSIONS; i++)
    ids.push((await gql(url, `mutation($r: String) { createSession(input: {runner: $r}) { id } }`, { r: runner })).createSession.id);
  const start = performance.now();
  await Promise.all(
    ids.map((id) => gql(url, `mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: MESSAGE })),
  );
  await answered(ctx, ids);
  return SESSIONS / ((performance.now() - start) / 1000);
}

/**
 * What an agent writes for MESSAGE, as the adapters write it (TurnWriter:
 * each step's start before its model call, the call before its tool runs,
 * each result as it comes): a step calling the clock, then a step answering.
 */
async function answer(session: RunnerSession): Promise<void> {
  await session.declareTools([{ name: 'clock', effect: 'read-only' }]);
  for (;;) {
    const req = await session.modelRequest();
    if (req.turn == null) return;
    const turn = session.turn(req);
    await turn.startStep();
    await turn.message({ text: '', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{}' }] });
    await turn.result({ id: 'c1', name: 'clock' }, 'ok', new Date().toISOString());
    await turn.startStep();
    await turn.message({ text: 'It is now.', toolCalls: [] });
    await turn.end('completed');
  }
}

/**
 * The runner's requests by operation (the SDK's operations are named; the
 * load generator's are not): round trips per turn do not depend on the
 * machine's load, turns/s does.
 */
function countRunnerRequests(): { counts: Map<string, number>; restore: () => void } {
  const counts = new Map<string, number>();
  const original = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const name = typeof init?.body === 'string' ? /^(?:query|mutation) (\w+)/.exec(init.body.slice(10, 80).replace(/^[^a-z]*/, ''))?.[1] : undefined;
    if (name) counts.set(name, (counts.get(name) ?? 0) + 1);
    return original(input, init);
  };
  return { counts, restore: () => void (globalThis.fetch = original) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function benchRunner(ctx: BenchContext) {
  const server = await startServer(ctx.databaseUrl);
  // Before the runner's client is made: it keeps the fetch it found.
  const requests = countRunnerRequests();
  // startTurns: each claim writes its turn's opening (docs/runners.md, step 2), as the fixture runners do.
  const runner = new ForklineRunner({ url: server.url, pool: 'bench', concurrency: 100, startTurns: true });
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
    const turns = SESSIONS * ROUNDS;
    const perTurn = (n: number) => round(n / turns, 2);
    const total = [...requests.counts.values()].reduce((a, b) => a + b, 0);
    return {
      sessions: SESSIONS,
      rounds: ROUNDS,
      ownTurnsPerSec: round(median(own), 1),
      externalTurnsPerSec: round(median(external), 1),
      ratio: round(median(external) / median(own), 2),
      ratiosPerRound: external.map((e, i) => round(e / own[i], 2)).join(' '),
      goal: 'external >= 0.5x own',
      runnerRequestsPerTurn: perTurn(total),
      appendsPerTurn: perTurn((requests.counts.get('AppendStep') ?? 0) + (requests.counts.get('AppendTurnEnd') ?? 0)),
      requestsPerTurnByOperation: [...requests.counts].map(([op, n]) => `${op} ${perTurn(n)}`).join(', '),
    };
  } finally {
    requests.restore();
    stopRunner.abort();
    await running;
    await runner.close();
    await stop(server);
  }
}
