// The edges of an external runner's lease, attacked at the door (docs/runners.md
// "When the lease ends"), through the real server:
// - a runner paused past its lease's end (GC, SIGSTOP) that nobody has claimed
//   yet resumes and writes: its call, its renewal, its tools, its deltas are all
//   refused, so no call goes in whose tool it would then run while another
//   runner may already be claiming; the next claim repairs what it left open;
// - a runner that renews its lease forever but never ends its step holds the
//   session no longer than FORKLINE_RUNNER_MAX_STEP_MS: the step is ended as
//   forkline's own agent ends a turn past its limit, and the session is free;
// - a user's cancelTurn on a turn a runner holds ends it at once, as forkline's
//   own agent ends a cancelled turn, and the runner's next write is refused.
// (Two runner processes paused with SIGSTOP: tests/client/runner-lease-edges.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { subscribeWs } from '../helpers/subscribe.ts';

const CREATE = `mutation($input: CreateSessionInput!) { createSession(input: $input) { id } }`;
const SEND = `mutation($id: ID!, $text: String!) { sendMessage(input: {sessionId: $id, text: $text}) { inputId } }`;
const CLAIM = `mutation($input: ClaimSessionInput!) { claimSession(input: $input) { session { id eventCount } lease { token expiresAt cancelRequested } } }`;
const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`;
const RENEW = `mutation($input: LeaseInput!) { renewLease(input: $input) { expiresAt cancelRequested } }`;
const CANCEL = `mutation($id: ID!) { cancelTurn(sessionId: $id) { status } }`;
const DECLARE = `mutation($input: DeclareRunnerToolsInput!) { declareRunnerTools(input: $input) { eventCount } }`;
const DELTA = `mutation($input: PublishTurnUpdateInput!) { publishTurnUpdate(input: $input) }`;
const SESSION = `query($id: ID!) { session(id: $id) { status runnerHolder eventCount pendingInputs { inputId } } }`;

const codeOf = (r: { errors?: Array<{ extensions?: { code?: string } }> }) => r.errors?.[0]?.extensions?.code;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A turn the service ended under a runner's lease (a limit, a cancel): the session is free with its one input waiting,
 * the runner's late result for call c1 is refused, and the next claim opens turn 2 for the input; its lease.
 */
async function freedForTheNextClaim(app: Pick<TestApp, 'gql' | 'ok'>, id: string, token: number): Promise<{ token: number; cancelRequested: boolean }> {
  const s = (await app.ok(SESSION, { id })).session;
  expect(s).toMatchObject({ status: 'IDLE', runnerHolder: null });
  expect(s.pendingInputs).toHaveLength(1);
  const late = { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'done', name: 'hangs' } };
  expect(codeOf(await app.gql(APPEND, { input: { sessionId: id, leaseToken: token, expectedEventCount: s.eventCount, events: [late] } }))).toBe('LEASE_LOST');
  const next = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'fresh', startTurn: true } })).claimSession;
  expect(next.session.eventCount).toBe(s.eventCount + 3);
  return next.lease;
}

describe('a lease that ran out, before anyone claimed the session', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());
  const events = async (id: string) =>
    (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data as any, synthetic: e.synthetic }));

  it('takes no write of its holder: not its call, nor a renewal that would revive it', async () => {
    const { id } = (await app.ok(CREATE, { input: { runner: 'paused' } })).createSession;
    await app.ok(SEND, { id, text: 'email bob' });
    // The runner claims with the turn's opening written (step 1 open), then pauses past its lease (the shortest there is).
    const { session, lease } = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'a', leaseMs: 500, startTurn: true } })).claimSession;
    await sleep(900);
    const before = await events(id);
    const call = {
      type: 'model/message',
      data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'send_email', arguments: '{"to":"bob"}' }] },
    };
    // It resumes and writes the call it would then run: refused (nobody claimed since, so its token is still the session's).
    const appended = await app.gql(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: session.eventCount, events: [call] } });
    expect(codeOf(appended)).toBe('LEASE_LOST');
    expect(appended.errors![0].message).toMatch(/ran out at/);
    // Nor may it renew the lease it no longer holds, declare tools or stream text under it.
    const input = { sessionId: id, leaseToken: lease.token };
    expect(codeOf(await app.gql(RENEW, { input: { ...input, leaseMs: 30_000 } }))).toBe('LEASE_LOST');
    expect(codeOf(await app.gql(DECLARE, { input: { ...input, tools: [{ name: 'send_email', effect: 'SIDE_EFFECTS' }] } }))).toBe('LEASE_LOST');
    expect(codeOf(await app.gql(DELTA, { input: { ...input, turn: 1, step: 1, text: 'Sending' } }))).toBe('LEASE_LOST');
    expect(await events(id)).toEqual(before);
    // The next claim repairs the step it left open: no call of its is in the log for anyone to take for its own.
    const next = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'b' } })).claimSession;
    const after = await events(id);
    expect(after.some((e) => e.type === 'model/message')).toBe(false);
    expect(after.slice(-2).map((e) => [e.type, e.data.reason, e.synthetic])).toEqual([
      ['step/end', 'interrupted', true],
      ['turn/end', 'interrupted', true],
    ]);
    expect(codeOf(await app.gql(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: after.length, events: [call] } }))).toBe(
      'LEASE_LOST',
    );
    await app.ok(`mutation($input: LeaseInput!) { releaseSession(input: $input) { id } }`, { input: { sessionId: id, leaseToken: next.lease.token } });
  });

  it('still takes the writes of a holder that renews within its term', async () => {
    const { id } = (await app.ok(CREATE, { input: { runner: 'renewing' } })).createSession;
    await app.ok(SEND, { id, text: 'hi' });
    // Renewed every third of its term (slack for a loaded machine), for longer than one term.
    const { session, lease } = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'a', leaseMs: 3000, startTurn: true } })).claimSession;
    for (let i = 0; i < 4; i++) {
      await sleep(1000);
      await app.ok(RENEW, { input: { sessionId: id, leaseToken: lease.token, leaseMs: 3000 } });
    }
    const done = [
      { type: 'model/message', data: { turn: 1, step: 1, text: 'hello', toolCalls: [] } },
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ];
    expect(
      (await app.ok(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: session.eventCount, events: done } })).appendEvents,
    ).toEqual({ eventCount: session.eventCount + 3 });
  });
});

describe('a step held open past FORKLINE_RUNNER_MAX_STEP_MS', () => {
  // Real time (a step's time runs from when the database stored its start): a short limit, waited for.
  const LIMIT_MS = 4000;
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ runnerMaxStepMs: LIMIT_MS });
  });
  afterAll(() => app?.close());
  const events = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data as any }));
  const renew = (sessionId: string, leaseToken: number) => app.gql(RENEW, { input: { sessionId, leaseToken, leaseMs: 30_000 } });

  it("is ended at the runner's next renewal as forkline's own agent ends a turn past its limit, and the session is free", async () => {
    const { id } = (await app.ok(CREATE, { input: { runner: 'stuck' } })).createSession;
    await app.ok(SEND, { id, text: 'run the tool' });
    const { session, lease } = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'stuck-1', startTurn: true } })).claimSession;
    const taken = subscribeWs<any>(app.url, `subscription { runnerLeasesTaken(runnerId: "stuck-1") { sessionId leaseToken reason } }`);
    const call = { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'hangs', arguments: '{}' }] } };
    await app.ok(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: session.eventCount, events: [call] } });
    // Its tool hangs; the runner goes on renewing. Within the limit, renewals hold.
    expect(codeOf(await renew(id, lease.token))).toBeUndefined();
    await app.ok(SEND, { id, text: 'next' }); // input waiting behind the stuck turn
    await sleep(LIMIT_MS + 500);
    const lost = await renew(id, lease.token);
    expect(codeOf(lost)).toBe('LEASE_LOST');
    expect(lost.errors![0].message).toMatch(/the step ran longer than its limit of 4000 ms/);
    // Its runner is told on runnerLeasesTaken too (coverage: the renewal's answer says it as well).
    expect((await taken.count(1)).map((i) => i.runnerLeasesTaken)).toEqual([{ sessionId: id, leaseToken: lease.token, reason: 'time limit' }]);
    await taken.close();
    // The same three events forkline's agent writes for a turn past FORKLINE_MAX_TURN_MS (core/time-limit.ts); the call
    // that never answered is left as a cancel leaves it.
    expect((await events(id)).slice(-3)).toEqual([
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'interrupted' } },
      {
        type: 'plugin/agent/error',
        data: { turn: 1, step: 1, message: `the step ran longer than its limit of ${LIMIT_MS} ms and was stopped (FORKLINE_RUNNER_MAX_STEP_MS)` },
      },
      { type: 'turn/end', data: { turn: 1, reason: 'failed' } },
    ]);
    // The stuck runner's late result is refused; the waiting input goes to the next claim.
    await freedForTheNextClaim(app, id, lease.token);
  });

  it('counts the wait for a decision on a call as no part of the step', async () => {
    const { id } = (await app.ok(CREATE, { input: { runner: 'decided' } })).createSession;
    await app.ok(SEND, { id, text: 'ask first' });
    const { session, lease } = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'asker', startTurn: true } })).claimSession;
    const call = { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'gated', arguments: '{}' }] } };
    const ask = { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: 'c1' } };
    await app.ok(`mutation($input: AppendEventsInput!) { appendEvents(input: $input) { released } }`, {
      input: { sessionId: id, leaseToken: lease.token, expectedEventCount: session.eventCount, events: [call, ask], release: true },
    });
    // A person decides after longer than the limit; the runner that takes the step up has the whole limit for it.
    await sleep(LIMIT_MS + 500);
    await app.ok(`mutation($input: ToolDecisionInput!) { approveToolCall(input: $input) { id } }`, { input: { sessionId: id, callId: 'c1' } });
    const taken = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'taker' } })).claimSession;
    expect(codeOf(await renew(id, taken.lease.token))).toBeUndefined();
    await sleep(LIMIT_MS + 500);
    expect(codeOf(await renew(id, taken.lease.token))).toBe('LEASE_LOST');
  });
});

describe("a user's cancelTurn on a turn a runner holds", () => {
  // The cancel ends the turn at once, as forkline's own agent ends a cancelled one, and takes the lease from the runner
  // (docs/runners.md "A user's cancel"): its next append or renewal answers LEASE_LOST naming the cancel. Before, the
  // cancel was kept on the row until the runner's next renewal, and a new call it appended meanwhile went in (its tool
  // then ran) after the user had cancelled. The leases are long (60 s): no renewal is what ends the turn here.
  let app: TestApp;
  beforeAll(async () => {
    app = await startTwoTenantApp();
  });
  afterAll(() => app?.close());
  // Tenant alpha's requests (the session's own tenant), as TestApp's are.
  const alpha: Pick<TestApp, 'gql' | 'ok'> = {
    gql: (query, variables, headers) => app.gql(query, variables, headers ?? A),
    async ok(query, variables) {
      const r = await app.gql(query, variables, A);
      if (r.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(r.errors)}`);
      return r.data;
    },
  };
  const events = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data as any }));
  const renew = (sessionId: string, leaseToken: number) => alpha.gql(RENEW, { input: { sessionId, leaseToken, leaseMs: 60_000 } });
  const call = (id: string, step = 1) => ({ type: 'model/message', data: { turn: 1, step, text: '', toolCalls: [{ id, name: 'hangs', arguments: '{}' }] } });
  /** A session of a pool whose runner claimed its turn (step 1 open) under a 60 s lease and stored call c1. */
  async function runnerWithACall(pool: string) {
    const { id } = (await alpha.ok(CREATE, { input: { runner: pool } })).createSession;
    await alpha.ok(SEND, { id, text: 'run the tool' });
    const { session, lease } = (await alpha.ok(CLAIM, { input: { sessionId: id, runnerId: 'r1', leaseMs: 60_000, startTurn: true } })).claimSession;
    expect(lease.cancelRequested).toBe(false);
    const { eventCount } = (
      await alpha.ok(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: session.eventCount, events: [call('c1')] } })
    ).appendEvents;
    return { id, token: lease.token as number, eventCount: eventCount as number };
  }

  it("ends the turn at once: the runner's next call is refused with LEASE_LOST naming the cancel, and the next turn runs", async () => {
    const { id, token, eventCount } = await runnerWithACall('cancelled');
    expect((await renew(id, token)).data.renewLease.cancelRequested).toBe(false);

    // The session reads as the cancel left it: the turn ended, nobody holding it.
    expect((await alpha.ok(CANCEL, { id })).cancelTurn.status).toBe('IDLE');
    const closed = await events(id);
    // What forkline's own agent writes for a cancelled turn: the call that never answered is left so.
    expect(closed.slice(-2)).toEqual([
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'interrupted' } },
      { type: 'turn/end', data: { turn: 1, reason: 'cancelled' } },
    ]);
    // The runner, not waiting for a renewal, answers c1 and asks for a new call c2: refused, as the log as it was
    // (stale) and as it is now (read again).
    const next = [
      { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'done', name: 'hangs' } },
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'step/start', data: { turn: 1, step: 2 } },
      call('c2', 2),
    ];
    for (const expectedEventCount of [eventCount, closed.length]) {
      const refused = await alpha.gql(APPEND, { input: { sessionId: id, leaseToken: token, expectedEventCount, events: next } });
      expect(codeOf(refused)).toBe('LEASE_LOST');
      expect(refused.errors![0].message).toMatch(/its turn was cancelled \(cancelTurn\)/);
    }
    const lost = await renew(id, token);
    expect(codeOf(lost)).toBe('LEASE_LOST');
    expect(lost.errors![0].message).toMatch(/its turn was cancelled \(cancelTurn\)/);
    expect(await events(id)).toEqual(closed);
    // A cancel of the turn that ended is refused, and writes nothing.
    expect(codeOf(await alpha.gql(CANCEL, { id }))).toBe('BAD_USER_INPUT');
    // The session takes a new message, and the next claim's turn is one no earlier cancel names.
    await alpha.ok(SEND, { id, text: 'next' });
    const fresh = await freedForTheNextClaim(alpha, id, token);
    const renewed = await renew(id, fresh.token);
    expect(codeOf(renewed)).toBeUndefined();
    expect(renewed.data.renewLease.cancelRequested).toBe(false);
  });

  it('offers the session to the pool again at once', async () => {
    const { id } = await runnerWithACall('offered');
    await alpha.ok(SEND, { id, text: 'waiting behind the turn' });
    await alpha.ok(CANCEL, { id });
    const claimed = (
      await alpha.ok(`mutation($input: ClaimSessionsInput!) { claimSessions(input: $input) { session { id } } }`, {
        input: { pool: 'offered', runnerId: 'r2', max: 1 },
      })
    ).claimSessions;
    expect(claimed.map((c: { session: { id: string } }) => c.session.id)).toEqual([id]);
  });

  it('keeps a batch that lands with the cancel whole before it, or refuses it whole', async () => {
    const { id, token, eventCount } = await runnerWithACall('raced');
    const answer = [
      { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'done', name: 'hangs' } },
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'step/start', data: { turn: 1, step: 2 } },
      call('c2', 2),
    ];
    const [appended, cancelled] = await Promise.all([
      alpha.gql(APPEND, { input: { sessionId: id, leaseToken: token, expectedEventCount: eventCount, events: answer } }),
      alpha.gql(CANCEL, { id }),
    ]);
    expect(cancelled.errors).toBeUndefined();
    const log = await events(id);
    if (appended.errors) {
      // The cancel went first: nothing of the batch is stored, and the turn ends at c1's step.
      expect(codeOf(appended)).toBe('LEASE_LOST');
      expect(log.slice(eventCount).map((e) => e.type)).toEqual(['step/end', 'turn/end']);
    } else {
      // The batch went first: its call c2 is closed with the rest of the turn, unanswered.
      expect(log.slice(eventCount, eventCount + answer.length)).toEqual(answer.map((e) => ({ type: e.type, data: expect.objectContaining(e.data) })));
      expect(log.slice(eventCount + answer.length)).toEqual([
        { type: 'step/end', data: { turn: 1, step: 2, reason: 'interrupted' } },
        { type: 'turn/end', data: { turn: 1, reason: 'cancelled' } },
      ]);
    }
    expect(log.at(-1)).toEqual({ type: 'turn/end', data: { turn: 1, reason: 'cancelled' } });
  });

  it("ends a turn whose runner's lease ran out, before anyone claimed it", async () => {
    const { id } = (await alpha.ok(CREATE, { input: { runner: 'lapsed' } })).createSession;
    await alpha.ok(SEND, { id, text: 'run the tool' });
    const { session, lease } = (await alpha.ok(CLAIM, { input: { sessionId: id, runnerId: 'r1', leaseMs: 500, startTurn: true } })).claimSession;
    await alpha.ok(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: session.eventCount, events: [call('c1')] } });
    await sleep(900);
    expect((await alpha.ok(CANCEL, { id })).cancelTurn.status).toBe('IDLE');
    const closed = await events(id);
    expect(closed.slice(-2)).toEqual([
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'interrupted' } },
      { type: 'turn/end', data: { turn: 1, reason: 'cancelled' } },
    ]);
    const late = await alpha.gql(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: closed.length, events: [call('c2', 2)] } });
    expect(codeOf(late)).toBe('LEASE_LOST');
    expect(await events(id)).toEqual(closed);
  });

  it("refuses another tenant's cancel, which leaves the runner's turn and lease as they were", async () => {
    const { id, token, eventCount } = await runnerWithACall('guarded');
    const foreign = await app.gql(CANCEL, { id }, B);
    expect(codeOf(foreign)).toBe('SESSION_NOT_FOUND');
    expect(await events(id)).toHaveLength(eventCount);
    const renewed = await renew(id, token);
    expect(codeOf(renewed)).toBeUndefined();
    expect(renewed.data.renewLease.cancelRequested).toBe(false);
    const result = { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'done', name: 'hangs' } };
    expect((await alpha.ok(APPEND, { input: { sessionId: id, leaseToken: token, expectedEventCount: eventCount, events: [result] } })).appendEvents).toEqual({
      eventCount: eventCount + 1,
    });
  });

  it('refuses a cancel when no turn runs, and then marks nothing', async () => {
    const { id } = (await alpha.ok(CREATE, { input: { runner: 'idle' } })).createSession;
    expect(codeOf(await alpha.gql(CANCEL, { id }))).toBe('BAD_USER_INPUT');
    await alpha.ok(SEND, { id, text: 'go' });
    const { lease } = (await alpha.ok(CLAIM, { input: { sessionId: id, runnerId: 'r1', startTurn: true } })).claimSession;
    const renewed = await renew(id, lease.token);
    expect(codeOf(renewed)).toBeUndefined();
    expect(renewed.data.renewLease.cancelRequested).toBe(false);
  });
});
