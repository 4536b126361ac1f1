// A user's cancelTurn on a session an external runner runs: the cancel is kept
// on the session's row, and the runner's next renewLease ends the turn as
// forkline's own agent ends a cancelled one (the open step `interrupted`, the
// turn `cancelled`), gives the lease back and answers LEASE_LOST, so the
// runner stops and nothing more of that turn is written (docs/runners.md
// "Cancelling"). Before, the cancel was only announced to forkline's own
// processes, and the runner's turn ran on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const CREATE = `mutation($input: CreateSessionInput!) { createSession(input: $input) { id } }`;
const SEND = `mutation($id: ID!, $text: String!) { sendMessage(input: {sessionId: $id, text: $text}) { inputId } }`;
const CLAIM = `mutation($input: ClaimSessionInput!) { claimSession(input: $input) { session { id eventCount } lease { token cancelRequested } } }`;
const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`;
const RENEW = `mutation($input: LeaseInput!) { renewLease(input: $input) { expiresAt cancelRequested } }`;
const CANCEL = `mutation($id: ID!) { cancelTurn(sessionId: $id) { status } }`;
const SESSION = `query($id: ID!) { session(id: $id) { status runnerHolder eventCount pendingInputs { inputId } } }`;

const codeOf = (r: { errors?: Array<{ extensions?: { code?: string } }> }) => r.errors?.[0]?.extensions?.code;

describe("cancelTurn on an external runner's session", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());
  const events = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data as any }));
  const renew = (sessionId: string, leaseToken: number) => app.gql(RENEW, { input: { sessionId, leaseToken, leaseMs: 30_000 } });

  it("ends the turn cancelled at the runner's next renewal, which answers LEASE_LOST; the next turn runs", async () => {
    const { id } = (await app.ok(CREATE, { input: { runner: 'cancelled' } })).createSession;
    await app.ok(SEND, { id, text: 'run the tool' });
    const { session, lease } = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r1', startTurn: true } })).claimSession;
    expect(lease.cancelRequested).toBe(false);
    const call = { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'hangs', arguments: '{}' }] } };
    await app.ok(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: session.eventCount, events: [call] } });
    expect((await renew(id, lease.token)).data.renewLease.cancelRequested).toBe(false);

    expect((await app.ok(CANCEL, { id })).cancelTurn.status).toBe('RUNNING');
    await app.ok(SEND, { id, text: 'next' }); // input waiting behind the cancelled turn
    const lost = await renew(id, lease.token);
    expect(codeOf(lost)).toBe('LEASE_LOST');
    expect(lost.errors![0].message).toMatch(/its turn was cancelled \(cancelTurn\)/);
    // What forkline's own agent writes for a cancelled turn: the call that never answered is left so.
    expect((await events(id)).slice(-2)).toEqual([
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'interrupted' } },
      { type: 'turn/end', data: { turn: 1, reason: 'cancelled' } },
    ]);
    const s = (await app.ok(SESSION, { id })).session;
    expect(s).toMatchObject({ status: 'IDLE', runnerHolder: null });
    expect(s.pendingInputs).toHaveLength(1);
    // The runner's late result is refused; the waiting input goes to the next claim, whose turn no earlier cancel names.
    const late = { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'done', name: 'hangs' } };
    expect(codeOf(await app.gql(APPEND, { input: { sessionId: id, leaseToken: lease.token, expectedEventCount: s.eventCount, events: [late] } }))).toBe(
      'LEASE_LOST',
    );
    const next = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r2', startTurn: true } })).claimSession;
    expect(next.session.eventCount).toBe(s.eventCount + 3); // turn 2 opened for the waiting input
    const renewed = await renew(id, next.lease.token);
    expect(codeOf(renewed)).toBeUndefined();
    expect(renewed.data.renewLease.cancelRequested).toBe(false);
  });

  it('refuses a cancel when no turn runs, and then marks nothing', async () => {
    const { id } = (await app.ok(CREATE, { input: { runner: 'idle' } })).createSession;
    expect(codeOf(await app.gql(CANCEL, { id }))).toBe('BAD_USER_INPUT');
    await app.ok(SEND, { id, text: 'go' });
    const { lease } = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r1', startTurn: true } })).claimSession;
    const renewed = await renew(id, lease.token);
    expect(codeOf(renewed)).toBeUndefined();
    expect(renewed.data.renewLease.cancelRequested).toBe(false);
  });
});
