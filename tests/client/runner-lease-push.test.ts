// The service taking a runner's lease reaches the runner at once
// (runnerLeasesTaken; docs/runners.md "A user's cancel"): a user's cancelTurn
// aborts RunnerSession.signal, and through an adapter the framework's abort
// signal, while the tool still runs, with no renewal or write of the runner's
// in between (the lease is 60 s: its first renewal is 20 s away; renewals are
// counted). The runner goes on serving its pool. A push names only the
// caller's tenant's sessions: another tenant subscribing for the same runner
// id hears nothing of them. It comes from whichever process took the lease
// (the cancel goes to another process of the service than the runner's).
// Before, the runner learnt of the cancel at its
// next renewal, and the tool ran until then.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAnthropic } from '@ai-sdk/anthropic';
import { tool as aiTool } from 'ai';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { look, useScriptedProvider } from '../helpers/call-id-sessions.ts';
import { A, B, TOKEN_A, TOKEN_B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { createTestDatabase } from '../helpers/db.ts';
import type { TestApp } from '../helpers/app.ts';

const { held, session, send, logOf } = useScriptedProvider('lease-push');

/** Counts the renewLease calls the service answers (its own method, wrapped: each one still renews). */
function countRenewals(app: TestApp) {
  const runners = app.services.runners;
  const renew = runners.renew.bind(runners);
  const count = { renewals: 0 };
  runners.renew = (...args) => (count.renewals++, renew(...args));
  return count;
}

/** Resolves once `signal` aborts. */
const aborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));

/** What the tool saw: that it started, and the renewals answered by the time its signal aborted (undefined: not yet). */
type Seen = { started: number; renewalsAtAbort?: number; reason?: unknown };

/**
 * A runner's work without a model: the first message's turn calls `wait`, a tool that runs until its signal aborts;
 * any later message is answered "answered: <text>".
 */
function waitingWork(seen: Seen, count: { renewals: number }) {
  return async (s: RunnerSession) => {
    const request = await s.modelRequest();
    if (request.turn == null) return;
    const turn = s.turn(request);
    await turn.startStep();
    const text = String((request.messages as Array<{ content?: unknown }>).at(-1)?.content);
    if (seen.started > 0) {
      await turn.message({ text: `answered: ${text}`, toolCalls: [] });
      await turn.end('completed');
      return;
    }
    await turn.message({ text: '', toolCalls: [{ id: 'c1', name: 'wait', arguments: '{}' }] });
    seen.started++;
    await aborted(s.signal);
    seen.renewalsAtAbort = count.renewals;
    seen.reason = s.signal.reason;
    await turn.result({ id: 'c1', name: 'wait' }, 'ok', 'finished after all'); // refused: the lease is gone
  };
}

const cancel = (app: TestApp, id: string, headers?: Record<string, string>) =>
  app.gql(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id }, headers);

const turnEnds = (log: Array<{ type: string; data: any }>) => log.filter((e) => e.type === 'turn/end').map((e) => e.data.reason);

/**
 * Serves the pool of `s` with `work` on a runner with a 60 s lease, cancels the turn once its tool runs: the tool's
 * signal aborts with no renewal in between, the turn ends cancelled, and the next message is answered `answer`.
 */
async function cancelWhileTheToolRuns(
  s: { id: string; pool: string },
  seen: Seen,
  answer: string,
  work: (runner: ForklineRunner, signal: AbortSignal) => Promise<void>,
  opts: { tools?: Array<{ name: string; effect: 'read-only' }> } = {},
) {
  const runner = new ForklineRunner({ url: held.app.url, pool: s.pool, leaseMs: 60_000, ...opts });
  const stop = new AbortController();
  const served = work(runner, stop.signal);
  try {
    await waitFor(() => seen.started === 1 && held.app.services.live.stats().leasesTaken === 1, { what: 'the tool to run, the runner listening' });
    expect((await cancel(held.app, s.id)).errors).toBeUndefined();
    await waitFor(() => seen.renewalsAtAbort !== undefined, { what: "the tool's signal to abort", timeoutMs: 45_000 });
    expect(seen.renewalsAtAbort).toBe(0);
    expect(String(seen.reason)).toMatch(/lease/i);
    expect(turnEnds(await logOf(s.id))).toEqual(['cancelled']);
    // The runner serves on: the next message is answered.
    await send(s.id, 'and now?');
    await waitFor(async () => turnEnds(await logOf(s.id)).length === 2, { what: 'the next turn' });
    const log = await logOf(s.id);
    expect(turnEnds(log)).toEqual(['cancelled', 'completed']);
    expect(log.filter((e) => e.type === 'model/message').at(-1)?.data.text).toBe(answer);
    expect(log.filter((e) => e.type === 'tool/result')).toEqual([]); // the tool's late answer was not stored
    expect(seen.started).toBe(1);
  } finally {
    stop.abort();
    await served;
    await runner.close();
  }
  await waitFor(() => held.app.services.live.stats().leasesTaken === 0, { what: 'the subscription to end with the runner' });
}

describe('a lease the service takes reaches its runner at once', () => {
  it('@forkline/runner: cancelTurn aborts the session signal while the tool runs, and the runner serves on', async () => {
    const count = countRenewals(held.app);
    const s = await session('wait for it');
    const seen: Seen = { started: 0 };
    await cancelWhileTheToolRuns(s, seen, 'answered: and now?', (runner, signal) => runner.run(waitingWork(seen, count), { signal }), {
      tools: [{ name: 'wait', effect: 'read-only' }],
    });
  }, 90_000);

  it("@forkline/ai-sdk: cancelTurn aborts the tool's abortSignal while it runs, and the runner serves on", async () => {
    const count = countRenewals(held.app);
    const s = await session('look up a');
    held.script = [[look('toolu_1', 'a')], 'the second answer'];
    const seen: Seen = { started: 0 };
    const lookup = aiTool({
      description: 'looks a key up',
      inputSchema: z.object({ key: z.string() }),
      execute: async (_input, { abortSignal }) => {
        seen.started++;
        await aborted(abortSignal!);
        seen.renewalsAtAbort = count.renewals;
        seen.reason = abortSignal!.reason;
        return 'finished after all';
      },
    });
    const model = createAnthropic({ baseURL: `${held.fake.base}/anthropic/v1`, apiKey: 'sk' })('fake-model');
    await cancelWhileTheToolRuns(s, seen, 'the second answer', (runner, signal) =>
      runner.run((session) => runAiSdkTurns(session, { model, tools: { lookup }, mode: 'stream' }).then(() => {}), { signal }),
    );
  }, 90_000);
});

describe('runnerLeasesTaken between tenants and processes', () => {
  /** Two processes of one service (one database): the runners talk to `app`, a cancel may go to `other`. */
  let app: TestApp;
  let other: TestApp;
  beforeAll(async () => {
    const databaseUrl = await createTestDatabase();
    app = await startTwoTenantApp({ databaseUrl });
    other = await startTwoTenantApp({ databaseUrl });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await other?.close();
  });

  it("reaches the runner from the process that took the lease, not the runner's", async () => {
    const count = countRenewals(app);
    const id = (await app.gql(`mutation { createSession(input: {runner: "far"}) { id } }`, undefined, A)).data.createSession.id as string;
    await app.gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "wait"}) { inputId } }`, { id }, A);
    const seen: Seen = { started: 0 };
    const runner = new ForklineRunner({ url: app.url, pool: 'far', token: TOKEN_A, leaseMs: 60_000, tools: [{ name: 'wait', effect: 'read-only' }] });
    const stop = new AbortController();
    const served = runner.run(waitingWork(seen, count), { signal: stop.signal });
    try {
      await waitFor(() => seen.started === 1 && app.services.live.stats().leasesTaken === 1, { what: 'the tool to run, the runner listening' });
      expect((await cancel(other, id, A)).errors).toBeUndefined();
      await waitFor(() => seen.renewalsAtAbort !== undefined, { what: "the tool's signal to abort", timeoutMs: 45_000 });
      expect(seen.renewalsAtAbort).toBe(0);
    } finally {
      stop.abort();
      await served;
      await runner.close();
    }
  }, 90_000);

  it("tells a tenant only of its own sessions' leases, whatever runner id another tenant names", async () => {
    const count = countRenewals(app);
    const runnerId = 'shared-name';
    const query = `subscription($r: String!) { runnerLeasesTaken(runnerId: $r) { sessionId leaseToken reason } }`;
    const client = (token: string) => wsClient(app.url, { connectionParams: { authorization: `Bearer ${token}` } });
    const [clientA, clientB] = [client(TOKEN_A), client(TOKEN_B)];
    const heardByA = subscribeWs<any>(app.url, query, { r: runnerId }, clientA);
    const heardByB = subscribeWs<any>(app.url, query, { r: runnerId }, clientB);
    // Each tenant runs a pool of the same name with a runner of the same id.
    const serve = async (headers: Record<string, string>, token: string) => {
      const id = (await app.gql(`mutation { createSession(input: {runner: "same-pool"}) { id } }`, undefined, headers)).data.createSession.id as string;
      await app.gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "wait"}) { inputId } }`, { id }, headers);
      const seen: Seen = { started: 0 };
      const runner = new ForklineRunner({ url: app.url, pool: 'same-pool', runnerId, token, leaseMs: 60_000, tools: [{ name: 'wait', effect: 'read-only' }] });
      const stop = new AbortController();
      const served = runner.run(waitingWork(seen, count), { signal: stop.signal });
      return { id, seen, end: async () => (stop.abort(), await served, await runner.close()) };
    };
    const [a, b] = [await serve(A, TOKEN_A), await serve(B, TOKEN_B)];
    try {
      await waitFor(() => a.seen.started === 1 && b.seen.started === 1 && app.services.live.stats().leasesTaken === 4, {
        what: 'both tools to run, every subscription listening',
      });
      // B cannot cancel A's turn (to B the session does not exist): nothing is taken from A's runner.
      expect((await cancel(other, a.id, B)).errors?.[0]?.extensions?.code).toBe('SESSION_NOT_FOUND');
      expect((await cancel(other, a.id, A)).errors).toBeUndefined();
      await heardByA.until((items) => items.length === 1, "A's push");
      await waitFor(() => a.seen.renewalsAtAbort !== undefined, { what: "A's tool to stop", timeoutMs: 45_000 });
      expect(b.seen.renewalsAtAbort).toBeUndefined(); // B's runner of the same id holds on
      // B's own cancel comes after A's: B's subscription, which would have heard A's first, hears its own only.
      expect((await cancel(other, b.id, B)).errors).toBeUndefined();
      await heardByB.until((items) => items.length === 1, "B's push");
      await waitFor(() => b.seen.renewalsAtAbort !== undefined, { what: "B's tool to stop", timeoutMs: 45_000 });
      expect(heardByA.items.map((i) => i.runnerLeasesTaken)).toEqual([{ sessionId: a.id, leaseToken: expect.any(Number), reason: 'cancelled' }]);
      expect(heardByB.items.map((i) => i.runnerLeasesTaken)).toEqual([{ sessionId: b.id, leaseToken: expect.any(Number), reason: 'cancelled' }]);
      expect([a.seen.renewalsAtAbort, b.seen.renewalsAtAbort]).toEqual([0, 0]);
    } finally {
      await a.end();
      await b.end();
      await heardByA.close();
      await heardByB.close();
      await clientA.dispose();
      await clientB.dispose();
    }
  }, 120_000);
});
