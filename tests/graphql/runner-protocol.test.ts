// The external runner protocol over GraphQL: runner pools on
// sessions (kept by forks), claims, fenced appends checked by the log's rules,
// the model request, live deltas, runnableSessions and crash repair.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { openSubscriptions, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { anotherToken } from '../helpers/lease-tokens.ts';
import { buildModelMessages } from '../../src/core/model-request.ts';
import { callFirstBatches } from '../helpers/runner-batches.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ runnableSweepMs: 200 });
});
afterAll(() => app.close());

const CREATE = `mutation($input: CreateSessionInput!) { createSession(input: $input) { id runner } }`;
const SEND = `mutation($id: ID!, $text: String!) { sendMessage(input: {sessionId: $id, text: $text}) { inputId } }`;
const CLAIM = `mutation($id: ID!, $runner: String!, $ms: Int) { claimSession(input: {sessionId: $id, runnerId: $runner, leaseMs: $ms}) { session { id eventCount runnerHolder } lease { sessionId token expiresAt } } }`;
const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { session { eventCount status } events { seq type data } } }`;
const RENEW = `mutation($id: ID!, $token: Int!) { renewLease(input: {sessionId: $id, leaseToken: $token}) { token expiresAt } }`;
const RELEASE = `mutation($id: ID!, $token: Int!) { releaseSession(input: {sessionId: $id, leaseToken: $token}) { id runnerHolder } }`;
const DELTA = `mutation($input: PublishTurnUpdateInput!) { publishTurnUpdate(input: $input) }`;
const REQUEST = `query($id: ID!) { session(id: $id) { eventCount runner runnerHolder pendingInputs { inputId } modelRequest { messages tools { name effect } turn step inputId inTurn } } }`;
const EVENTS = `query($id: ID!) { session(id: $id) { eventCount status events(first: 500) { edges { node { seq type data synthetic } } } } }`;

const events = async (id: string) => (await app.ok(EVENTS, { id })).session.events.edges.map((e: any) => e.node);
const eventCount = async (id: string) => (await app.ok(EVENTS, { id })).session.eventCount as number;

async function externalSession(text?: string): Promise<{ id: string; inputId?: string }> {
  const { createSession } = await app.ok(CREATE, { input: { title: 'ext', runner: 'ext' } });
  if (text === undefined) return { id: createSession.id };
  const { sendMessage } = await app.ok(SEND, { id: createSession.id, text });
  return { id: createSession.id, inputId: sendMessage.inputId };
}

async function claim(id: string, runner = 'r1', ms?: number): Promise<number> {
  return (await app.ok(CLAIM, { id, runner, ms })).claimSession.lease.token;
}

const append = (sessionId: string, leaseToken: number, expectedEventCount: number, evs: Array<{ type: string; data: unknown }>) =>
  app.gql(APPEND, { input: { sessionId, leaseToken, expectedEventCount, events: evs } });
/** `evs` as a runner appends them, the calls first (callFirstBatches): the last append's answer, or the first refusal. */
async function appendCallFirst(sessionId: string, leaseToken: number, expectedEventCount: number, evs: Array<{ type: string; data: unknown }>) {
  let expected = expectedEventCount;
  let r: any;
  for (const batch of callFirstBatches(evs)) {
    r = await append(sessionId, leaseToken, expected, batch);
    if (r.errors) return r;
    expected += batch.length;
  }
  return r;
}

/** A first step that calls a tool, its result and the step's end: a runner appends it in two batches, the call first (appendCallFirst). */
const toolStep = (inputId: string) => [
  { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
  { type: 'turn/start', data: { turn: 1, inputId } },
  { type: 'step/start', data: { turn: 1, step: 1 } },
  { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{}', effect: 'read-only' }] } },
  { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r-c1', status: 'ok', content: '12:00', name: 'clock' } },
  { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
];
const answerStep = (turn: number, step: number, text: string) => [
  { type: 'step/start', data: { turn, step } },
  { type: 'model/message', data: { turn, step, text, toolCalls: [] } },
  { type: 'step/end', data: { turn, step, reason: 'completed' } },
  { type: 'turn/end', data: { turn, reason: 'completed' } },
];

describe('runner pools on sessions', () => {
  it("records the pool; forkline's own agent never runs such a session", async () => {
    const { id } = await externalSession('hello');
    await app.services.host.idle();
    const s = (await app.ok(REQUEST, { id })).session;
    expect(s.runner).toBe('ext');
    expect(s.eventCount).toBe(2); // session/title, inbox/add: no turn was taken
    expect(s.pendingInputs).toHaveLength(1);
    const own = (await app.ok(CREATE, { input: {} })).createSession;
    expect(own.runner).toBeNull();
  });

  it('refuses a pool name that is not one', async () => {
    const r = await app.gql(CREATE, { input: { runner: 'no spaces' } });
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });

  it('is kept by forks, branches, edits and fan-outs, whose children forkline does not run either', async () => {
    const { id, inputId } = await externalSession('first');
    const token = await claim(id);
    expect((await appendCallFirst(id, token, 2, [...toolStep(inputId!), ...answerStep(1, 2, 'done')])).errors).toBeUndefined();
    const fork = (await app.ok(`mutation($id: ID!) { forkSession(input: {sessionId: $id, atSeq: 5, message: "again"}) { session { id runner } } }`, { id }))
      .forkSession;
    const branch = (await app.ok(`mutation($id: ID!) { branchSession(input: {sessionId: $id, message: "b"}) { session { id runner } } }`, { id }))
      .branchSession;
    const edit = (
      await app.ok(`mutation($id: ID!, $in: ID!) { editMessage(input: {sessionId: $id, inputId: $in, text: "e"}) { session { id runner } } }`, {
        id,
        in: inputId,
      })
    ).editMessage;
    const fan = (
      await app.ok(`mutation($id: ID!) { fanOut(input: {sessionId: $id, variants: [{message: "x"}, {message: "y"}]}) { children { id runner } } }`, { id })
    ).fanOut;
    const children = [fork.session, branch.session, edit.session, ...fan.children];
    expect(children.map((c: any) => c.runner)).toEqual(['ext', 'ext', 'ext', 'ext', 'ext']);
    await app.services.host.idle();
    for (const c of children) {
      const evs = await events(c.id);
      expect(evs.filter((e: any) => e.type === 'turn/start' && !e.synthetic).length).toBeLessThanOrEqual(1); // only inherited turns
      expect((await app.ok(REQUEST, { id: c.id })).session.pendingInputs).toHaveLength(1);
    }
  });
});

describe('recordings of externally run sessions', () => {
  it('keep the runner pool through export and import (POST /recordings and importRecording); forkline never runs the import', async () => {
    const { id, inputId } = await externalSession('first');
    const token = await claim(id, 'rec');
    expect((await appendCallFirst(id, token, 2, [...toolStep(inputId!), ...answerStep(1, 2, 'done')])).errors).toBeUndefined();
    await app.ok(RELEASE, { id, token });
    await app.ok(SEND, { id, text: 'waiting for the pool' });
    const recording = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id })).session.recording as string;
    expect(JSON.parse(recording.split('\n')[0]).session).toMatchObject({ id, runner: 'ext' });
    const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: recording,
    });
    expect(res.status).toBe(201);
    const uploaded = ((await res.json()) as any).session.id;
    const imported = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id runner } }`, { r: recording })).importRecording;
    expect(imported.runner).toBe('ext');
    await app.services.host.idle();
    for (const copy of [uploaded, imported.id]) {
      const s = (await app.ok(REQUEST, { id: copy })).session;
      expect(s).toMatchObject({ runner: 'ext', eventCount: 13 });
      expect(s.pendingInputs).toHaveLength(1); // the pool's to take, not forkline's agent's
      expect(s.modelRequest).toMatchObject({ turn: 2, step: 1 });
    }
    // A session forkline runs exports no runner, and its import is forkline's again.
    const own = (await app.ok(CREATE, { input: { title: 'own' } })).createSession;
    const ownRecording = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: own.id })).session.recording as string;
    expect(JSON.parse(ownRecording.split('\n')[0]).session).toEqual({ id: own.id, title: 'own' });
    expect((await app.ok(`mutation($r: String!) { importRecording(recording: $r) { runner } }`, { r: ownRecording })).importRecording.runner).toBeNull();
  });
});

describe('declareRunnerTools', () => {
  const DECLARE = `mutation($input: DeclareRunnerToolsInput!) { declareRunnerTools(input: $input) { eventCount tools { name effect } modelRequest { tools { name description effect inputSchema } eventCount } } }`;
  const clock = { name: 'clock', description: 'The time', inputSchema: { type: 'object', properties: {} }, effect: 'READ_ONLY' };
  const send = { name: 'send_email', effect: 'SIDE_EFFECTS' };

  it('records the set once, lists it in the request and Session.tools, and records calls with the declared effects', async () => {
    const { id, inputId } = await externalSession('what time is it?');
    const token = await claim(id);
    const declared = (await app.ok(DECLARE, { input: { sessionId: id, leaseToken: token, tools: [clock, send] } })).declareRunnerTools;
    expect(declared.eventCount).toBe(3);
    expect(declared.tools).toEqual([
      { name: 'clock', effect: 'READ_ONLY' },
      { name: 'send_email', effect: 'SIDE_EFFECTS' },
    ]);
    expect(declared.modelRequest.tools[0]).toEqual({
      name: 'clock',
      description: 'The time',
      effect: 'READ_ONLY',
      inputSchema: { type: 'object', properties: {} },
    });
    // The same set again (in another order) writes nothing.
    expect((await app.ok(DECLARE, { input: { sessionId: id, leaseToken: token, tools: [send, clock] } })).declareRunnerTools.eventCount).toBe(3);
    const evs = await events(id);
    expect(evs.at(-1)).toMatchObject({
      type: 'session/runner-tools',
      data: {
        tools: [
          { name: 'clock', effect: 'read-only' },
          { name: 'send_email', effect: 'side-effects' },
        ],
      },
    });

    // A call naming another effect than the declared one is refused; without one it gets the declared one.
    const step = structuredClone(toolStep(inputId!).slice(0, 4)); // inbox/remove, turn/start, step/start, model/message (call c1 of clock)
    delete (step[3].data as any).toolCalls[0].effect;
    const lying = structuredClone(step);
    (lying[3].data as any).toolCalls[0].effect = 'side-effects';
    const refused = await append(id, token, 3, lying);
    expect(refused.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'call effect', seq: 6 });
    expect((await append(id, token, 3, step)).errors).toBeUndefined();
    expect((await events(id)).at(-1).data.toolCalls[0]).toMatchObject({ id: 'c1', name: 'clock', effect: 'read-only' });
    // A stale token declares nothing.
    expect((await app.gql(DECLARE, { input: { sessionId: id, leaseToken: anotherToken(token), tools: [] } })).errors?.[0].extensions?.code).toBe('LEASE_LOST');
  });
});

describe('claims and leases', () => {
  it('claims, refuses a second claim while held, renews, releases', async () => {
    const { id } = await externalSession('hi');
    const r = await app.ok(CLAIM, { id, runner: 'r1' });
    expect(r.claimSession.session.runnerHolder).toBe('r1');
    const token = r.claimSession.lease.token;
    const busy = await app.gql(CLAIM, { id, runner: 'r2' });
    expect(busy.errors?.[0].extensions?.code).toBe('SESSION_BUSY');
    const renewed = (await app.ok(RENEW, { id, token })).renewLease;
    expect(renewed.token).toBe(token);
    const released = (await app.ok(RELEASE, { id, token })).releaseSession;
    expect(released.runnerHolder).toBeNull();
    // A released lease fences nothing: its token is refused.
    expect((await app.gql(RENEW, { id, token })).errors?.[0].extensions?.code).toBe('LEASE_LOST');
    expect((await append(id, token, 2, toolStep('x').slice(0, 1))).errors?.[0].extensions?.code).toBe('LEASE_LOST');
    // The next holder's token is drawn at random, never the last one's (docs/runners.md): the old token fences it out.
    expect(await claim(id, 'r2')).not.toBe(token);
    expect((await app.gql(RENEW, { id, token })).errors?.[0].extensions?.code).toBe('LEASE_LOST');
  });

  it("refuses to claim a session forkline's own agent runs", async () => {
    const own = (await app.ok(CREATE, { input: {} })).createSession;
    expect((await app.gql(CLAIM, { id: own.id, runner: 'r1' })).errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });
});

describe('appendEvents and the model request', () => {
  it('writes a turn with a tool call; the model request follows it as forkline builds it; deltas and turns reach sessionTurns', async () => {
    const { id, inputId } = await externalSession('what time is it?');
    const open = await openSubscriptions(app.url);
    const turns = subscribeWs(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind turn step text } }`, { id });
    await subscriptionsOpened(app.url, open, 1); // live updates only: it listens before the turn starts
    const token = await claim(id);
    const first = (await app.ok(REQUEST, { id })).session.modelRequest;
    expect(first).toMatchObject({ turn: 1, step: 1, inputId, inTurn: false });
    expect(first.messages).toEqual([{ role: 'user', content: 'what time is it?' }]);
    // forkline's catalog is not the runner's to run: a runner session's request lists what its runner declared (nothing yet).
    expect(first.tools).toEqual([]);

    const written = await appendCallFirst(id, token, 2, toolStep(inputId!));
    expect(written.errors).toBeUndefined();
    expect(written.data.appendEvents.session).toMatchObject({ eventCount: 8, status: 'RUNNING' });
    const second = (await app.ok(REQUEST, { id })).session.modelRequest;
    expect(second).toMatchObject({ turn: 1, step: 2, inTurn: true, inputId: null });
    expect(second.messages).toEqual(buildModelMessages(await events(id)));
    expect(second.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'c1', content: '12:00' });

    await app.ok(DELTA, { input: { sessionId: id, leaseToken: token, turn: 1, step: 2, text: 'It is ' } });
    const done = await append(id, token, 8, answerStep(1, 2, 'It is 12:00.'));
    expect(done.data.appendEvents.session).toMatchObject({ eventCount: 12, status: 'IDLE' });
    await turns.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'the turn to end');
    const kinds = turns.items.map((u) => u.sessionTurns.kind);
    expect(kinds).toContain('TURN_STARTED');
    expect(kinds).toContain('TOOL_FINISHED');
    expect(turns.items.find((u) => u.sessionTurns.kind === 'TEXT_DELTA')?.sessionTurns.text).toBe('It is ');
    await turns.close();
    expect((await app.ok(REQUEST, { id })).session.modelRequest).toMatchObject({ turn: null, step: null, inTurn: false });
  });

  it('the request is as of the session row it was read with (one snapshot), even when the log moved on after the row was read', async () => {
    const { id, inputId } = await externalSession('what time is it?');
    const token = await claim(id);
    expect((await appendCallFirst(id, token, 2, toolStep(inputId!))).errors).toBeUndefined();
    // The host's fold of the session is now at seq 8; a row read before the batch said 2 events.
    const atEight = (await app.ok(REQUEST, { id })).session;
    expect(atEight).toMatchObject({ eventCount: 8, modelRequest: { turn: 1, step: 2, inTurn: true } });
    const asOfTwo = await app.services.runners.modelRequest({ tenant: 'local' }, { id, eventCount: 2, runner: 'ext' });
    expect(asOfTwo).toMatchObject({ turn: 1, step: 1, inputId, inTurn: false, eventCount: 2 });
    expect(asOfTwo.messages).toEqual([{ role: 'user', content: 'what time is it?' }]);
    // The fold kept for the session is still the newest one.
    expect(await app.services.runners.modelRequest({ tenant: 'local' }, { id, runner: 'ext' })).toMatchObject({ turn: 1, step: 2, eventCount: 8 });
  });

  it('a fork mid-call: the request carries the synthetic result and its wording, as forkline would send it', async () => {
    const { id, inputId } = await externalSession('time?');
    const token = await claim(id);
    await append(id, token, 2, toolStep(inputId!).slice(0, 4)); // the call, no result
    const { forkSession } = await app.ok(
      `mutation($id: ID!) { forkSession(input: {sessionId: $id, atSeq: 5, message: "and now?"}) { session { id runner } } }`,
      { id },
    );
    const child = forkSession.session.id;
    const req = (await app.ok(REQUEST, { id: child })).session.modelRequest;
    const tool = req.messages.find((m: any) => m.role === 'tool');
    expect(tool.content).toContain('No result for tool call "clock" (c1) is recorded in this branch');
    expect(tool.content).toContain('safe to call it again');
    expect(req.messages).toEqual([...buildModelMessages(await events(child)), { role: 'user', content: 'and now?' }]);
    expect(req).toMatchObject({ turn: 2, step: 1, inTurn: false });
  });
});

describe('bad batches are refused with their rule, and nothing is written', () => {
  let id: string;
  let inputId: string;
  let token: number;
  beforeAll(async () => {
    ({ id, inputId } = (await externalSession('q')) as { id: string; inputId: string });
    token = await claim(id);
  });

  it('an unpaired result', async () => {
    const batch = toolStep(inputId).slice(0, 3);
    batch.push({ type: 'tool/result', data: { turn: 1, step: 1, callId: 'nope', resultId: 'r', status: 'ok', content: 'x', name: 'clock' } });
    const r = await append(id, token, 2, batch);
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'result pairing', seq: 5 });
    expect(await eventCount(id)).toBe(2);
  });

  it('wrong turn numbering', async () => {
    const r = await append(id, token, 2, [
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 2, inputId } },
    ]);
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'turn numbering', seq: 3 });
    expect(await eventCount(id)).toBe(2);
  });

  it('a step outside its bracket', async () => {
    const r = await append(id, token, 2, [{ type: 'step/start', data: { turn: 1, step: 1 } }]);
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'step bracket', seq: 2 });
    expect(await eventCount(id)).toBe(2);
  });

  it('a wrong token', async () => {
    const r = await append(id, anotherToken(token), 2, toolStep(inputId).slice(0, 4));
    expect(r.errors?.[0].extensions?.code).toBe('LEASE_LOST');
    expect(await eventCount(id)).toBe(2);
  });

  it('a wrong expected event count', async () => {
    const r = await append(id, token, 5, toolStep(inputId).slice(0, 4));
    expect(r.errors?.[0].extensions?.code).toBe('SESSION_BUSY');
    expect(await eventCount(id)).toBe(2);
  });

  it("events that are not a runner's to write", async () => {
    const r = await append(id, token, 2, [{ type: 'inbox/add', data: { inputId: 'x', text: 'y' } }]);
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'runner events', seq: 2 });
    expect(await eventCount(id)).toBe(2);
  });

  it('then a good batch goes in', async () => {
    expect((await appendCallFirst(id, token, 2, [...toolStep(inputId), ...answerStep(1, 2, 'ok')])).errors).toBeUndefined();
    expect(await eventCount(id)).toBe(12);
  });
});

describe('a call and its result in one batch (rule call first, docs/runners.md "Why the call goes first")', () => {
  // An attacker runner's batches: the result was had before its call was stored, so a fork cut or a crash while the
  // tool ran found no call in flight, and would run it again.
  const resultOf = (callId: string, status: 'ok' | 'error') => ({
    type: 'tool/result',
    data: { turn: 1, step: 1, callId, resultId: `r-${callId}`, status, content: status === 'ok' ? '12:00' : 'the clock broke', name: 'clock' },
  });
  const callOf = (callId: string) => ({
    type: 'model/message',
    data: { turn: 1, step: 1, text: '', toolCalls: [{ id: callId, name: 'clock', arguments: '{}', effect: 'read-only' }] },
  });

  for (const status of ['ok', 'error'] as const) {
    it(`is refused with the result's seq when the result is ${status}; the log is unchanged`, async () => {
      const { id, inputId } = await externalSession('time?');
      const token = await claim(id);
      const before = await events(id);
      const r = await append(id, token, 2, [...toolStep(inputId!).slice(0, 4), resultOf('c1', status)]);
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'call first', seq: 6 });
      expect(r.errors?.[0].message).toContain('event 6 (tool/result): the result of call c1 comes in the batch that makes the call');
      expect(await events(id)).toEqual(before);
      // Split after the model/message, the same events go in.
      expect((await append(id, token, 2, toolStep(inputId!).slice(0, 4))).errors).toBeUndefined();
      expect((await append(id, token, 6, [resultOf('c1', status)])).errors).toBeUndefined();
      expect(await eventCount(id)).toBe(7);
    });
  }

  it('is refused when another call stands between the call and its result in the batch', async () => {
    const { id, inputId } = await externalSession('time?');
    const token = await claim(id);
    const r = await append(id, token, 2, [...toolStep(inputId!).slice(0, 4), callOf('c2'), resultOf('c1', 'ok')]);
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'call first', seq: 7 });
    expect(await eventCount(id)).toBe(2);
  });

  it("accepts a batch with a call and the result of another call stored before it; then the new call's result in the next batch", async () => {
    const { id, inputId } = await externalSession('time?');
    const token = await claim(id);
    expect((await append(id, token, 2, toolStep(inputId!).slice(0, 4))).errors).toBeUndefined(); // c1, stored
    const both = await append(id, token, 6, [callOf('c2'), resultOf('c1', 'ok')]);
    expect(both.errors).toBeUndefined();
    expect(both.data.appendEvents.session.eventCount).toBe(8);
    const next = await append(id, token, 8, [resultOf('c2', 'error'), { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } }]);
    expect(next.errors).toBeUndefined();
    expect((await events(id)).slice(6).map((e: any) => [e.type, e.data.callId ?? null])).toEqual([
      ['model/message', null],
      ['tool/result', 'c1'],
      ['tool/result', 'c2'],
      ['step/end', null],
    ]);
  });
});

describe('crash repair', () => {
  it('an expired lease with an open turn is repaired once (interrupted) before the next claim; the stale runner is refused', async () => {
    const { id, inputId } = await externalSession('slow');
    const stale = await claim(id, 'dies', 1500); // the append below must land within it, on a loaded machine too
    await append(id, stale, 2, toolStep(inputId!).slice(0, 4)); // mid-call
    let next = 0;
    await waitFor(
      async () => {
        const r = await app.gql(CLAIM, { id, runner: 'heir' });
        if (r.errors) return false;
        next = r.data.claimSession.lease.token;
        return true;
      },
      { what: 'the lease to expire and be claimed' },
    );
    const evs = await events(id);
    const closers = evs.filter((e: any) => e.synthetic);
    expect(closers.map((e: any) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end']);
    expect(closers[0].data.status).toBe('interrupted');
    expect(closers[2].data.reason).toBe('interrupted');
    const r = await append(id, stale, evs.length, answerStep(2, 1, 'late'));
    expect(r.errors?.[0].extensions?.code).toBe('LEASE_LOST');
    expect(await eventCount(id)).toBe(evs.length);
    await app.ok(RELEASE, { id, token: next });
    // Claimed again: nothing more to repair.
    await claim(id, 'third');
    expect((await events(id)).filter((e: any) => e.synthetic)).toHaveLength(3);
  });
});

describe('the fast path: claimSessions and appendEvents release', () => {
  const CLAIM_MANY = `mutation($input: ClaimSessionsInput!) { claimSessions(input: $input) { session { id runnerHolder modelRequest { turn step inputId eventCount } } lease { token } } }`;
  const APPEND_END = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount released modelRequest { turn step inputId eventCount } session { runnerHolder status } } }`;
  const inPool = async (pool: string, text: string) => {
    const { createSession } = await app.ok(CREATE, { input: { runner: pool } });
    const { sendMessage } = await app.ok(SEND, { id: createSession.id, text });
    return { id: createSession.id as string, inputId: sendMessage.inputId as string };
  };

  it('claims as many runnable sessions as asked, oldest first, each with its first request; then none', async () => {
    const sessions = [await inPool('many', 'a'), await inPool('many', 'b'), await inPool('many', 'c')];
    const first = (await app.ok(CLAIM_MANY, { input: { pool: 'many', runnerId: 'bulk', max: 2 } })).claimSessions;
    expect(first.map((c: any) => c.session.id)).toEqual([sessions[0].id, sessions[1].id]);
    for (const [i, c] of first.entries()) {
      expect(c.session.runnerHolder).toBe('bulk');
      expect(c.session.modelRequest).toEqual({ turn: 1, step: 1, inputId: sessions[i].inputId, eventCount: 1 });
    }
    const rest = (await app.ok(CLAIM_MANY, { input: { pool: 'many', runnerId: 'bulk2', max: 5 } })).claimSessions;
    expect(rest.map((c: any) => c.session.id)).toEqual([sessions[2].id]);
    expect((await app.ok(CLAIM_MANY, { input: { pool: 'many', runnerId: 'bulk3', max: 5 } })).claimSessions).toEqual([]);
    // Held leases are fenced as claimSession's are.
    expect((await app.gql(CLAIM, { id: sessions[0].id, runner: 'late' })).errors?.[0].extensions?.code).toBe('SESSION_BUSY');
  });

  it("startTurn: the claim writes each turn's opening under its lease; the request is the started step's, and the runner's first append is the answer", async () => {
    const CLAIM_STARTING = `mutation($input: ClaimSessionsInput!) { claimSessions(input: $input) {
      session { id status eventCount modelRequest { turn step inputId inTurn stepOpen eventCount messages } } lease { token } } }`;
    const sessions = [await inPool('starting', 'one'), await inPool('starting', 'two')];
    const claims = (await app.ok(CLAIM_STARTING, { input: { pool: 'starting', runnerId: 'starter', max: 5, startTurn: true } })).claimSessions;
    expect(claims.map((c: any) => c.session.id)).toEqual(sessions.map((s) => s.id));
    for (const [i, c] of claims.entries()) {
      expect(c.session).toMatchObject({ status: 'RUNNING', eventCount: 4 });
      expect(c.session.modelRequest).toMatchObject({ turn: 1, step: 1, inputId: null, inTurn: true, stepOpen: true, eventCount: 4 });
      expect(c.session.modelRequest.messages.at(-1)).toEqual({ role: 'user', content: i === 0 ? 'one' : 'two' });
      const evs = await events(c.session.id);
      expect(evs.map((e: any) => [e.type, e.data])).toEqual([
        ['inbox/add', expect.objectContaining({ inputId: sessions[i].inputId })],
        ['inbox/remove', { inputId: sessions[i].inputId, reason: 'taken' }],
        ['turn/start', { turn: 1, inputId: sessions[i].inputId }],
        ['step/start', { turn: 1, step: 1 }],
      ]);
    }
    // The step is open: the answer continues it (a second step/start 1 would break the step numbering).
    const [c] = claims;
    const again = await append(c.session.id, c.lease.token, 4, [{ type: 'step/start', data: { turn: 1, step: 1 } }]);
    expect(again.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', seq: 4 });
    const end = (
      await app.ok(APPEND_END, {
        input: { sessionId: c.session.id, leaseToken: c.lease.token, expectedEventCount: 4, events: answerStep(1, 1, 'hi').slice(1), release: true },
      })
    ).appendEvents;
    expect(end).toMatchObject({ eventCount: 7, released: true, session: { status: 'IDLE' } });
    // A claim with nothing to start (no input waiting) writes nothing.
    await app.ok(RELEASE, { id: sessions[1].id, token: claims[1].lease.token });
    const idle = (
      await app.ok(
        CLAIM_STARTING.replace('claimSessions(input: $input)', 'claimSession(input: {sessionId: $id, runnerId: "idle", startTurn: true})').replace(
          '$input: ClaimSessionsInput!',
          '$id: ID!',
        ),
        { id: c.session.id },
      )
    ).claimSession;
    expect(idle.session).toMatchObject({ status: 'IDLE', eventCount: 7, modelRequest: { turn: null, inTurn: false, stepOpen: false, eventCount: 7 } });
  });

  it("the turn's last batch gives the lease back when nothing is left; its token is refused after", async () => {
    const { id, inputId } = await externalSession('once');
    const token = await claim(id, 'r-release');
    expect((await appendCallFirst(id, token, 2, toolStep(inputId!))).errors).toBeUndefined();
    const end = (
      await app.ok(APPEND_END, { input: { sessionId: id, leaseToken: token, expectedEventCount: 8, events: answerStep(1, 2, 'done'), release: true } })
    ).appendEvents;
    expect(end).toEqual({ eventCount: 12, released: true, modelRequest: null, session: { runnerHolder: null, status: 'IDLE' } });
    const late = await append(id, token, 12, [{ type: 'plugin/late/note', data: {} }]);
    expect(late.errors?.[0].extensions?.code).toBe('LEASE_LOST');
    expect(await eventCount(id)).toBe(12);
  });

  it("with input waiting, the turn's last batch keeps the lease and brings the next turn's request", async () => {
    const { id, inputId } = await externalSession('first');
    const second = (await app.ok(SEND, { id, text: 'second' })).sendMessage.inputId;
    const token = await claim(id, 'r-keep');
    expect((await appendCallFirst(id, token, 3, toolStep(inputId!))).errors).toBeUndefined();
    const end = (
      await app.ok(APPEND_END, { input: { sessionId: id, leaseToken: token, expectedEventCount: 9, events: answerStep(1, 2, 'one'), release: true } })
    ).appendEvents;
    expect(end).toEqual({
      eventCount: 13,
      released: false,
      modelRequest: { turn: 2, step: 1, inputId: second, eventCount: 13 },
      session: { runnerHolder: 'r-keep', status: 'IDLE' },
    });
    await app.ok(RELEASE, { id, token });
  });
});

describe('runnableSessions', () => {
  it("repairs an open turn once its runner's lease ends, before any claim; a claim after it repairs nothing more", async () => {
    const { createSession } = await app.ok(CREATE, { input: { runner: 'sweep' } });
    const id = createSession.id;
    const inputId = (await app.ok(SEND, { id, text: 'slow' })).sendMessage.inputId;
    const sub = subscribeWs(app.url, `subscription { runnableSessions(pool: "sweep") { id eventCount status } }`);
    await sub.until((items) => items.some((i) => i.runnableSessions.id === id), 'the waiting session');
    const stale = await claim(id, 'dies', 1500); // the append below must land within it, on a loaded machine too
    await app.ok(APPEND, { input: { sessionId: id, leaseToken: stale, expectedEventCount: 1, events: toolStep(inputId).slice(0, 4) } }); // mid-call
    await app.ok(SEND, { id, text: 'after the crash' }); // waits for the next runner
    // Nobody claims: the feed's look when the lease ends repairs the turn and offers the session again.
    await sub.until(
      (items) => items.some((i) => i.runnableSessions.id === id && i.runnableSessions.eventCount === 9 && i.runnableSessions.status === 'IDLE'),
      'the repaired session',
    );
    const evs = await events(id);
    expect(evs.filter((e: any) => e.synthetic).map((e: any) => [e.type, e.data.status ?? e.data.reason])).toEqual([
      ['tool/result', 'interrupted'],
      ['step/end', 'interrupted'],
      ['turn/end', 'interrupted'],
    ]);
    expect(
      (await app.gql(APPEND, { input: { sessionId: id, leaseToken: stale, expectedEventCount: evs.length, events: answerStep(1, 2, 'late') } })).errors?.[0]
        .extensions?.code,
    ).toBe('LEASE_LOST');
    const heir = await claim(id, 'heir');
    expect(heir).not.toBe(stale);
    expect(await events(id)).toEqual(evs); // repaired once
    await app.ok(RELEASE, { id, token: heir });
    await sub.close();
  });

  it("yields the pool's sessions with work, waiting ones first, then new ones, and again once released with work left", async () => {
    const waiting = await externalSession('waiting');
    const sub = subscribeWs(app.url, `subscription { runnableSessions(pool: "ext") { id runner } }`);
    await sub.until((items) => items.some((i) => i.runnableSessions.id === waiting.id), 'the waiting session');
    const other = await app.ok(CREATE, { input: { runner: 'other' } });
    await app.ok(SEND, { id: other.createSession.id, text: 'not ours' });
    const fresh = await externalSession('new');
    await sub.until((items) => items.some((i) => i.runnableSessions.id === fresh.id), 'the new session');
    expect(sub.items.every((i) => i.runnableSessions.runner === 'ext')).toBe(true);
    await sub.close();
  });
});
