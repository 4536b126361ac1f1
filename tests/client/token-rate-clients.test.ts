// Clients under an API token's rate (FORKLINE_RATE_LIMIT_RPS, 20 requests a
// second after a burst of 100; each token its own bucket). A model streams
// far more text pieces a second than that, so the runner SDKs (TypeScript and
// Python) send at most one publishTurnUpdate a session at a time and join
// what comes meanwhile (docs/runners.md "Stream text"): a live client still
// sees every piece, in order, and the bucket is left for the runner's
// appends. A request refused 429 did nothing, so the typed client and the
// runners send it again after its Retry-After (docs/api.md).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForklineRunner } from '@forkline/runner';
import { CreateSessionDocument, createForklineClient } from '@forkline/client';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { subscribeWs, wsClient } from '../helpers/subscribe.ts';

/** The test's own reads and subscriptions, and one token per client under test. */
const TOKENS = {
  setup: 'rate-setup-0123456789',
  ts: 'rate-ts-runner-0123456789',
  drained: 'rate-drained-0123456789',
  client: 'rate-client-0123456789',
  py: 'rate-py-runner-0123456789',
};
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
let app: TestApp;
const runners: ForklineRunner[] = [];

beforeAll(async () => {
  const apiTokens = new Map(Object.values(TOKENS).map((t) => [t, 'acme'] as const));
  app = await startTestApp({ security: { apiTokens, rateLimit: { perSecond: 20, burst: 100 } } });
});
afterAll(async () => {
  await Promise.all(runners.map((r) => r.close()));
  await app?.close();
});

async function gql(query: string, variables?: Record<string, unknown>) {
  const r = await app.gql(query, variables, bearer(TOKENS.setup));
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

/** Another client of `token` spends its bucket: the token's next requests are refused 429 for a while. */
async function spendBucket(token: string) {
  const answers = await Promise.all(Array.from({ length: 150 }, () => app.gql('{ __typename }', {}, bearer(token))));
  expect(answers.filter((r) => r.status === 429).length).toBeGreaterThan(0);
}

/** A session of runner pool `pool` with a message waiting, and its turns followed from that message on. */
async function sessionWithInput(pool: string) {
  const id = (await gql(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  const sent = await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "go"}) { event { seq } } }`, { id });
  // What the log holds after the input, then live: subscribed now, a turn's deltas are seen once it has started.
  const turns = subscribeWs<{ sessionTurns: { kind: string; text: string | null } }>(
    app.url,
    `subscription($id: ID!, $after: Int) { sessionTurns(sessionId: $id, afterSeq: $after) { kind text } }`,
    { id, after: sent.sendMessage.event.seq },
    wsClient(app.url, { connectionParams: bearer(TOKENS.setup) }),
  );
  const liveText = async () => {
    await turns.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'TURN_ENDED');
    await turns.close();
    return turns.items.filter((u) => u.sessionTurns.kind === 'TEXT_DELTA').map((u) => u.sessionTurns.text);
  };
  return { id, turns, liveText };
}

const lastEvent = async (id: string) =>
  (await gql(`query($id: ID!) { session(id: $id) { events(last: 1) { edges { node { type data } } } } }`, { id })).session.events.edges[0].node;

const PIECES = Array.from({ length: 400 }, (_, i) => `w${i} `);

describe('the TypeScript runner SDK', () => {
  it("streams a model's 400 pieces at once to a live client whole and in order, in a few requests", async () => {
    const logged: string[] = [];
    const runner = new ForklineRunner({ url: app.url, pool: 'ts-deltas', token: TOKENS.ts, log: (m, err) => logged.push(`${m} ${String(err ?? '')}`) });
    runners.push(runner);
    const { id, turns, liveText } = await sessionWithInput('ts-deltas');
    const session = (await runner.claim(id))!;
    const turn = session.turn(await session.modelRequest());
    await turn.startStep();
    await turns.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_STARTED'), 'TURN_STARTED');
    // As the adapters do: each piece handed on as the model streams it, nothing awaited between them.
    await Promise.all(PIECES.map((p) => turn.delta(p)));
    await turn.message({ text: PIECES.join(''), toolCalls: [] });
    turn.endStep();
    await turn.end('completed');
    await session.release();

    const live = await liveText();
    expect(live.join('')).toBe(PIECES.join(''));
    // Joined while one was out: a few requests, not one a piece (one a piece ran the bucket dry, the rest refused).
    expect(live.length).toBeLessThan(20);
    expect(logged).toEqual([]);
    expect(await lastEvent(id)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it("waits out a 429 (the token's bucket spent by another client) and its turn still completes", async () => {
    const runner = new ForklineRunner({ url: app.url, pool: 'drained', token: TOKENS.drained });
    runners.push(runner);
    const { id } = await sessionWithInput('drained');
    const session = (await runner.claim(id))!;
    const turn = session.turn(await session.modelRequest());
    await turn.startStep();
    await spendBucket(TOKENS.drained);
    await turn.message({ text: 'done', toolCalls: [] });
    turn.endStep();
    await turn.end('completed');
    await session.release();
    expect(await lastEvent(id)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });
});

describe('the typed client', () => {
  it('sends a request refused 429 again after its Retry-After', async () => {
    const client = createForklineClient({ url: app.url, token: TOKENS.client });
    await spendBucket(TOKENS.client);
    const { createSession } = await client.mutate(CreateSessionDocument, { input: { title: 'after the wait' } });
    expect(createSession.title).toBe('after the wait');
  });

  it('answers the refusal when its Retry-After is past retryForMs', async () => {
    const slow = await startTestApp({
      databaseUrl: app.db.url,
      security: { apiTokens: new Map([[TOKENS.client, 'acme']]), rateLimit: { perSecond: 0.01, burst: 1 } },
    });
    try {
      const client = createForklineClient({ url: slow.url, token: TOKENS.client });
      await client.mutate(CreateSessionDocument, { input: { title: 'the one' } });
      // The next token comes in 100 s, past the default 15 s of retryForMs.
      await expect(client.mutate(CreateSessionDocument, { input: { title: 'refused' } })).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    } finally {
      await slow.close();
    }
  });
});

describe('the Python runner SDK', () => {
  it("streams a model's 400 pieces to a live client whole and in order, joined while one is out", async () => {
    const { id, liveText } = await sessionWithInput('py-deltas');
    // execFile, not spawnSync: this process serves the runner.
    const py = await promisify(execFile)('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_deltas.py')], {
      env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'), FORKLINE_URL: app.url, TOKEN: TOKENS.py, POOL: 'py-deltas', SESSION: id },
      timeout: 60_000,
    });
    expect(py.stdout.trim().split('\n')).toEqual(['done']); // nothing logged: no delta refused or dropped
    const live = await liveText();
    expect(live.join('')).toBe(PIECES.join(''));
    expect(live.length).toBeLessThan(200);
    expect(await lastEvent(id)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });
});
