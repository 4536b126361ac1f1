// A fork cut mid-call of an externally run session sends the external model
// exactly what forkline's own agent sends for the same fork: the
// same history is run once by forkline's agent (its request read from its
// trace, captured content on) and once written by an external runner; both
// are forked at the call, and the request forkline's agent sent for its child
// equals the external child's Session.modelRequest, synthetic result and its
// wording included (up to the parent's id the wording names).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../telemetry/otlp-receiver.ts';
import { inputMessages } from '../../src/telemetry/genai-tracing.ts';

let app: TestApp;
let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  app = await startTestApp({ tracing: { url: receiver.url, scheduledDelayMillis: 20, captureContent: true } });
});
afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

const EVENTS = `query($id: ID!) { session(id: $id) { events(first: 100) { edges { node { seq type data } } } } }`;
const events = async (id: string) => (await app.ok(EVENTS, { id })).session.events.edges.map((e: any) => e.node);
const create = async (runner?: string) =>
  (await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, { i: { runner } })).createSession.id as string;
const send = async (id: string, text: string) =>
  (await app.ok(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text })).sendMessage
    .inputId as string;
const fork = async (id: string, atSeq: number) =>
  (
    await app.ok(`mutation($id: ID!, $at: Int!) { forkSession(input: {sessionId: $id, atSeq: $at, message: "and now?"}) { session { id } } }`, {
      id,
      at: atSeq,
    })
  ).forkSession.session.id as string;

describe('a fork mid-call of an externally run session', () => {
  it("sends the external model what forkline's own agent sends for the same fork", async () => {
    // forkline's own agent runs a turn that calls the clock.
    const own = await create();
    await send(own, 'what time is it?\n!call clock');
    await app.services.host.idle();
    const ownEvents = await events(own);
    const call = ownEvents.find((e: any) => e.type === 'model/message' && e.data.toolCalls.length > 0);

    // An external runner writes the same turn up to that call (and crashes there).
    const ext = await create('ext');
    const inputId = await send(ext, 'what time is it?\n!call clock');
    const { claimSession } = await app.ok(`mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r"}) { lease { token } } }`, { id: ext });
    const upToCall = ownEvents
      .filter((e: any) => e.seq > 0 && e.seq <= call.seq)
      .map((e: any) => ({ type: e.type, data: e.type === 'inbox/remove' || e.type === 'turn/start' ? { ...e.data, inputId } : e.data }));
    await app.ok(`mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`, {
      input: { sessionId: ext, leaseToken: claimSession.lease.token, expectedEventCount: 1, events: upToCall },
    });

    // Both forked at the call: forkline's agent runs its child; the external child's request is read.
    const ownChild = await fork(own, call.seq);
    const extChild = await fork(ext, call.seq);
    await app.services.host.idle();
    await app.tracing?.forceFlush();
    const sent = await waitFor(() => receiver.spans.find((s) => s.name === 'chat scripted' && s.attributes['gen_ai.conversation.id'] === ownChild), {
      what: "the own child's model call",
      timeoutMs: 10_000,
    });
    const request = (await app.ok(`query($id: ID!) { session(id: $id) { modelRequest { messages turn step } } }`, { id: extChild })).session.modelRequest;
    expect(request).toMatchObject({ turn: 2, step: 1 });
    // The wording names the session forked (each its own parent): the one difference there may be.
    const external = inputMessages(request.messages).replaceAll(ext, '<parent>');
    const forklines = (sent.attributes['gen_ai.input.messages'] as string).replaceAll(own, '<parent>');
    expect(JSON.parse(external)).toEqual(JSON.parse(forklines));
    const tool = request.messages.find((m: any) => m.role === 'tool');
    expect(tool.content).toContain(`No result for tool call "clock" (${call.data.toolCalls[0].id}) is recorded in this branch`);
  });
});
