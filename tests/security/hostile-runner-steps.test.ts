// A runner that writes a step no repair can close: more tool calls in one
// step than one append holds. The rules bound a step's calls (docs/contract.md
// `step calls`), as forkline's own agent bounds an answer's, so a step a
// runner left open when it died is repaired by the next claim in one append;
// and a repair the runnable feed cannot write (a log stored before the bound)
// ends neither the pool's feed nor the other sessions' repairs. Through the
// real server, its runnableSessions subscription and its claims.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_STEP_CALLS } from '../../src/core/log-state.ts';
import { MAX_APPEND_BATCH } from '../../src/store/session-store.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeWs } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
const errors: string[] = [];

beforeAll(async () => {
  app = await startTestApp({ runnableSweepMs: 200, log: (msg) => void errors.push(msg) });
});
afterAll(() => app.close());

const CREATE = `mutation($input: CreateSessionInput!) { createSession(input: $input) { id } }`;
const SEND = `mutation($id: ID!, $text: String!) { sendMessage(input: {sessionId: $id, text: $text}) { inputId } }`;
const CLAIM = `mutation($input: ClaimSessionInput!) { claimSession(input: $input) { session { id eventCount status } lease { token } } }`;
const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`;
const STATE = `query($id: ID!) { session(id: $id) { status eventCount runnerHolder } }`;

const calls = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ id: `call_${from + i}`, name: 'send_email', arguments: '{}' }));

/** A session of `pool` whose runner opened a turn and wrote a step's message with `n` calls, under a lease of `leaseMs`. */
async function openStep(pool: string, n: number, leaseMs = 30_000) {
  const { id } = (await app.ok(CREATE, { input: { title: 't', runner: pool } })).createSession;
  const inputId = (await app.ok(SEND, { id, text: 'send them' })).sendMessage.inputId;
  const claim = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'doomed', leaseMs } })).claimSession;
  const append = (at: number, events: unknown[]) =>
    app.gql(APPEND, { input: { sessionId: id, leaseToken: claim.lease.token, expectedEventCount: at, events } });
  const opening = [
    { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn: 1, inputId } },
    { type: 'step/start', data: { turn: 1, step: 1 } },
  ];
  const at = claim.session.eventCount;
  const message = n > 0 ? [{ type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: calls(n) } }] : [];
  const r = await append(at, [...opening, ...message]);
  return { id, append, written: r, at: at + 3 + message.length };
}

describe("a step's calls", () => {
  it('a repair of the most calls a step holds fits one append', () => {
    // A result per call, the step's end, a failed turn's error, the turn's end.
    expect(MAX_STEP_CALLS + 3).toBeLessThanOrEqual(MAX_APPEND_BATCH);
  });

  it('refuses a step past the bound, in one message or over several, and writes nothing of the batch', async () => {
    const over = await openStep('steps-over', MAX_STEP_CALLS + 1);
    expect(over.written.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'step calls', seq: over.at - 1 });
    expect((await app.ok(STATE, { id: over.id })).session.eventCount).toBe(over.at - 4);

    const at = await openStep('steps-over', MAX_STEP_CALLS - 1);
    expect(at.written.errors).toBeUndefined();
    const more = await at.append(at.at, [{ type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: calls(2, MAX_STEP_CALLS) } }]);
    expect(more.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'step calls', seq: at.at });
  });

  it('repairs a step at the bound its runner left open in the next claim, once: every call gets its result, and the claim holds', async () => {
    const step = await openStep('steps-bound', MAX_STEP_CALLS, 500);
    expect(step.written.errors).toBeUndefined();
    // The runner dies: its lease ends with the turn open. The next claim repairs it.
    await new Promise((r) => setTimeout(r, 700));
    const claim = await app.gql(CLAIM, { input: { sessionId: step.id, runnerId: 'next' } });
    expect(claim.errors).toBeUndefined();
    const log = await app.services.store.log.page(step.id, step.at - 1, MAX_STEP_CALLS + 10);
    expect(log.filter((e) => e.type === 'tool/result' && e.synthetic && (e.data as { status: string }).status === 'interrupted')).toHaveLength(MAX_STEP_CALLS);
    expect(log.slice(-2).map((e) => [e.type, (e.data as { reason: string }).reason])).toEqual([
      ['step/end', 'interrupted'],
      ['turn/end', 'interrupted'],
    ]);
    expect((await app.ok(STATE, { id: step.id })).session).toMatchObject({ status: 'IDLE', runnerHolder: 'next' });
  }, 60_000);

  it("a repair the runnable feed cannot write ends neither the pool's feed nor the other sessions' repairs", async () => {
    // A log stored before the bound: its open step holds more calls than one append can answer.
    const stuck = await openStep('steps-feed', 0, 500);
    const message = { turn: 1, step: 1, text: '', toolCalls: calls(MAX_APPEND_BATCH + 500) };
    await app.db.pool.query(
      `WITH s AS (UPDATE "Session" SET "eventCount" = "eventCount" + 1 WHERE id = $1 RETURNING "treeId", "eventCount" - 1 AS seq)
       INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount") SELECT $1, s.seq, s."treeId", 'model/message', $2::jsonb, false, 0 FROM s`,
      [stuck.id, JSON.stringify(message)],
    );
    // Another session of the pool whose runner died mid-call, with a message waiting for the next runner.
    const other = await openStep('steps-feed', 1, 500);
    await app.ok(SEND, { id: other.id, text: 'and then?' });
    await new Promise((r) => setTimeout(r, 700));

    const feed = subscribeWs(app.url, `subscription { runnableSessions(pool: "steps-feed") { id status eventCount } }`);
    try {
      // The other session is repaired and offered (its turn closed, its message waiting); the feed goes on.
      await feed.until((items) => items.some((i) => i.runnableSessions.id === other.id && i.runnableSessions.status === 'IDLE'), 'the repaired session');
      await new Promise((r) => setTimeout(r, 600)); // more looks of the feed, each finding the stuck session again
      expect(feed.errors).toEqual([]);
      expect(feed.completed).toBe(false);
      await waitFor(() => errors.some((m) => m.includes(stuck.id)), { what: "the failed repair's log line" });
    } finally {
      await feed.close();
    }
    // With the feed gone (its looks took the session to repair), the stuck session's claim answers why and gives its lease back.
    // (A look that began before the close may still hold it for its repair a moment: SESSION_BUSY until it gives it back.)
    const code = await waitFor(
      async () => {
        const claim = await app.gql(CLAIM, { input: { sessionId: stuck.id, runnerId: 'next' } });
        const c = claim.errors?.[0].extensions?.code as string | undefined;
        return c === 'SESSION_BUSY' ? undefined : (c ?? 'claimed');
      },
      { what: 'a claim that is not SESSION_BUSY' },
    );
    expect(code).toBe('BAD_USER_INPUT');
    expect((await app.ok(STATE, { id: stuck.id })).session).toMatchObject({ status: 'RUNNING', runnerHolder: null });
  }, 60_000);
});
