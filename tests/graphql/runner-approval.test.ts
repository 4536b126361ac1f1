// Tool approval in the external runner protocol (docs/runners.md, docs/contract.md#tool-approval):
// a runner writes a call and its approval request under the log's rules and gives the lease back
// with it; the session is WAITING and no sweep repairs it; the decision is in its log when the
// runner claims it again (not repaired as a crash), and the runner goes on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ runnableSweepMs: 200 });
});
afterAll(() => app.close());

const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { released session { eventCount status } } }`;
const CLAIM = `mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r1"}) { session { eventCount status } lease { token } } }`;
const SESSION = `query($id: ID!) { session(id: $id) { status eventCount runnerHolder pendingApprovals { callId name seq } } }`;

describe('an external runner and tool approval', () => {
  it('writes the request and waits; the decision is in its log at its next claim, which repairs nothing', async () => {
    const { createSession } = await app.ok(`mutation { createSession(input: {title: "ext", runner: "ext"}) { id } }`);
    const id = createSession.id as string;
    const { sendMessage } = await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "mail them"}) { inputId } }`, { id });
    const first = (await app.ok(CLAIM, { id })).claimSession;
    const call = { id: 'c1', name: 'send_email', arguments: '{"to":"a@b"}', effect: 'side-effects' };
    const paused = await app.ok(APPEND, {
      input: {
        sessionId: id,
        leaseToken: first.lease.token,
        expectedEventCount: first.session.eventCount,
        release: true,
        events: [
          { type: 'inbox/remove', data: { inputId: sendMessage.inputId, reason: 'taken' } },
          { type: 'turn/start', data: { turn: 1, inputId: sendMessage.inputId } },
          { type: 'step/start', data: { turn: 1, step: 1 } },
          { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [call] } },
          { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: 'c1' } },
        ],
      },
    });
    expect(paused.appendEvents).toMatchObject({ released: true, session: { status: 'WAITING' } });
    // A result before the decision breaks the rules: the call cannot have run.
    const second = (await app.ok(CLAIM, { id })).claimSession;
    expect(second.session.status).toBe('WAITING');
    const early = await app.gql(APPEND, {
      input: {
        sessionId: id,
        leaseToken: second.lease.token,
        expectedEventCount: second.session.eventCount,
        events: [{ type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'sent' } }],
      },
    });
    expect(early.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'approval pairing' });
    await app.ok(`mutation($id: ID!, $t: Int!) { releaseSession(input: {sessionId: $id, leaseToken: $t}) { id } }`, { id, t: second.lease.token });
    // The sweep that repairs abandoned open turns leaves a waiting one alone.
    await new Promise((r) => setTimeout(r, 600));
    const waiting = (await app.ok(SESSION, { id })).session;
    expect(waiting).toMatchObject({
      status: 'WAITING',
      eventCount: paused.appendEvents.session.eventCount,
      pendingApprovals: [{ callId: 'c1', name: 'send_email' }],
    });

    const approved = await app.ok(`mutation($id: ID!) { approveToolCall(input: {sessionId: $id, callId: "c1", reason: "ok"}) { status eventCount } }`, { id });
    expect(approved.approveToolCall.status).toBe('RUNNING');
    const third = (await app.ok(CLAIM, { id })).claimSession;
    expect(third.session.eventCount).toBe(approved.approveToolCall.eventCount); // nothing repaired: the turn is the runner's to go on with
    const done = await app.ok(APPEND, {
      input: {
        sessionId: id,
        leaseToken: third.lease.token,
        expectedEventCount: third.session.eventCount,
        release: true,
        events: [
          { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'sent' } },
          { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
          { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
        ],
      },
    });
    expect(done.appendEvents).toMatchObject({ released: true, session: { status: 'IDLE' } });
  });
});
