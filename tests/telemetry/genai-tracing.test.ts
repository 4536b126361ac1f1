// OpenTelemetry GenAI traces, exported over OTLP/HTTP to a real
// receiver in the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.ts';
import { GenAiTracing, tracingOptionsFromEnv, turnSpanIds } from '../../src/telemetry/genai-tracing.ts';
import { anyData } from '../helpers/event-data.ts';

const SPAN_KIND_INTERNAL = 1;
const SPAN_KIND_CLIENT = 3;
const STATUS_ERROR = 2;

let receiver: OtlpReceiver;
let app: TestApp;
const logged: string[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  app = await startTestApp({
    tracing: { url: receiver.url, scheduledDelayMillis: 20, captureContent: true },
    log: (m) => logged.push(m),
  });
});
afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

const create = async () => (await app.ok(`mutation { createSession(input: { title: "traced" }) { id } }`)).createSession.id as string;
const send = (sessionId: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });
const idle = () => app.services.host.idle();
const log = async (id: string) => app.services.store.log.page(id, -1, 10_000);

/** The spans of one session, once `count` of them arrived. */
async function spansOf(sessionId: string, count: number, from: OtlpReceiver = receiver): Promise<ReceivedSpan[]> {
  await app.tracing?.forceFlush();
  return waitFor(
    () => {
      const spans = from.spans.filter((s) => s.attributes['gen_ai.conversation.id'] === sessionId);
      return spans.length >= count ? spans : undefined;
    },
    { what: `${count} spans of ${sessionId}`, timeoutMs: 10_000 },
  );
}

describe('OpenTelemetry GenAI traces', () => {
  it('a two-step turn with a tool call: invoke_agent, two chat spans and an execute_tool span, parented, with GenAI attributes', async () => {
    const id = await create();
    const { sendMessage } = await send(id, 'what time is it\n!call clock');
    await idle();
    const spans = await spansOf(id, 4);
    expect(spans).toHaveLength(4);
    const turn = spans.find((s) => s.name === 'invoke_agent')!;
    const chats = spans.filter((s) => s.name === 'chat scripted');
    const tool = spans.find((s) => s.name === 'execute_tool clock')!;
    expect(chats).toHaveLength(2);
    expect(tool).toBeDefined();

    // The turn is the root of its own trace, with ids derived from (session, turn).
    expect(turn.parentSpanId).toBeUndefined();
    expect({ traceId: turn.traceId, spanId: turn.spanId }).toEqual(turnSpanIds(id, 1));
    expect(turn.kind).toBe(SPAN_KIND_INTERNAL);
    expect(turn.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'scripted',
      'gen_ai.request.model': 'scripted',
      'gen_ai.conversation.id': id,
      'forkline.turn': 1,
      'forkline.input_id': sendMessage.inputId,
      'forkline.turn.end_reason': 'completed',
    });
    expect(turn.status.code).not.toBe(STATUS_ERROR);
    expect(JSON.parse(turn.attributes['gen_ai.input.messages'] as string)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'what time is it\n!call clock' }] },
    ]);
    expect(turn.resource['service.name']).toBe('forkline');

    for (const s of [...chats, tool]) {
      expect(s.traceId).toBe(turn.traceId);
      expect(s.parentSpanId).toBe(turn.spanId);
      expect(s.attributes['gen_ai.conversation.id']).toBe(id);
    }
    const [first, second] = chats.sort((a, b) => (a.attributes['forkline.step'] as number) - (b.attributes['forkline.step'] as number));
    for (const chat of chats) {
      expect(chat.kind).toBe(SPAN_KIND_CLIENT);
      expect(chat.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'scripted', 'gen_ai.request.model': 'scripted' });
      expect(chat.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
      expect(chat.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    }
    expect(first.attributes['gen_ai.response.finish_reasons']).toEqual(['tool_calls']);
    expect(second.attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);
    expect(JSON.parse(first.attributes['gen_ai.output.messages'] as string)[0].parts).toEqual([
      { type: 'tool_call', id: 'call_1_1_1', name: 'clock', arguments: {} },
    ]);
    expect(JSON.parse(second.attributes['gen_ai.input.messages'] as string).at(-1)).toMatchObject({
      role: 'tool',
      parts: [{ type: 'tool_call_response', id: 'call_1_1_1' }],
    });
    expect(turn.attributes['gen_ai.usage.input_tokens']).toBe(
      (first.attributes['gen_ai.usage.input_tokens'] as number) + (second.attributes['gen_ai.usage.input_tokens'] as number),
    );

    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'clock',
      'gen_ai.tool.call.id': 'call_1_1_1',
      'gen_ai.tool.call.arguments': '{}',
      'forkline.tool.status': 'ok',
      'forkline.step': 1,
    });
    expect(tool.attributes['gen_ai.tool.call.result']).toMatch(/^\d{4}-/);
  });

  it('a failed model call and a failed tool end with error status', async () => {
    const id = await create();
    await send(id, '!call note_read {"key":"missing"}');
    await idle();
    await send(id, '!fail the model broke');
    await idle();
    const spans = await spansOf(id, 6);
    const tool = spans.find((s) => s.name === 'execute_tool note_read')!;
    expect(tool.status).toMatchObject({ code: STATUS_ERROR, message: 'no note named "missing"' });
    expect(tool.attributes['error.type']).toBe('tool_error');
    const chats = spans.filter((s) => s.name.startsWith('chat '));
    expect(chats.map((c) => c.status.code)).toContain(STATUS_ERROR);
    expect(spans.find((s) => s.name === 'invoke_agent' && s.attributes['forkline.turn'] === 1)!.status.code).not.toBe(STATUS_ERROR);
    const turn = spans.find((s) => s.name === 'invoke_agent' && s.attributes['forkline.turn'] === 2)!;
    expect(turn.status).toEqual({ code: STATUS_ERROR, message: 'the model broke' });
    expect(turn.attributes['forkline.turn.end_reason']).toBe('failed');
  });

  it("a forked child's first turn links to the parent's turn span at the cut; the seed's synthetic results are marked", async () => {
    const id = await create();
    await send(id, 'first');
    await idle();
    await send(id, 'second\n!call clock');
    await idle();
    await spansOf(id, 2 + 4);
    const events = await log(id);
    // Cut right after turn 2's model message: its clock call has no result in the child.
    const cut = events.find((e) => e.type === 'model/message' && anyData(e).turn === 2 && anyData(e).toolCalls.length)!.seq;
    const fork = await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`, {
      i: { sessionId: id, atSeq: cut, message: 'go on' },
    });
    const child = fork.forkSession.session.id as string;
    await idle();
    const spans = await spansOf(child, 3).catch((err) => {
      throw new Error(`${err.message}: ${JSON.stringify(receiver.spans.filter((s) => s.attributes['gen_ai.conversation.id'] === child))}`);
    });
    const turn = spans.find((s) => s.name === 'invoke_agent')!;
    expect({ traceId: turn.traceId, spanId: turn.spanId }).toEqual(turnSpanIds(child, 3));
    expect(turn.attributes).toMatchObject({ 'forkline.fork.parent_session_id': id, 'forkline.fork.cut_seq': cut, 'forkline.turn': 3 });
    const parentSpan = receiver.spans.find(
      (s) => s.name === 'invoke_agent' && s.attributes['gen_ai.conversation.id'] === id && s.attributes['forkline.turn'] === 2,
    )!;
    expect(turn.links).toHaveLength(1);
    expect(turn.links[0]).toMatchObject({
      traceId: parentSpan.traceId,
      spanId: parentSpan.spanId,
      attributes: { 'forkline.link': 'fork', 'forkline.fork.parent_session_id': id },
    });
    const synthetic = spans.find((s) => s.attributes['forkline.synthetic'] === true)!;
    expect(synthetic.name).toBe('execute_tool clock');
    expect(synthetic.parentSpanId).toBe(turn.spanId);
    expect(synthetic.attributes).toMatchObject({
      'forkline.synthetic.cause': 'forked',
      'forkline.tool.status': 'not-started',
      'gen_ai.tool.call.id': 'call_2_1_1',
    });

    // A grandchild cut inside what the child inherited links to the span of the session that ran that turn (the grandparent).
    const grand = await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`, {
      i: { sessionId: child, atSeq: events.find((e) => e.type === 'turn/end' && anyData(e).turn === 1)!.seq, message: 'again' },
    });
    await idle();
    const grandSpans = await spansOf(grand.forkSession.session.id, 2);
    const grandTurn = grandSpans.find((s) => s.name === 'invoke_agent')!;
    expect(grandTurn.links[0]).toMatchObject(turnSpanIds(id, 1));
    expect(grandTurn.attributes['forkline.fork.parent_session_id']).toBe(child);
  });

  it('no spans and no errors when the endpoint is unset; none and the agent unaffected when it is down', async () => {
    expect(tracingOptionsFromEnv({})).toBeUndefined();
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBeUndefined();
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toEqual({ captureContent: false });
    expect(tracingOptionsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' })).toEqual({
      captureContent: true,
    });

    // Off: a second app shares the database; nothing reaches any receiver.
    const quiet = await startOtlpReceiver();
    const before = receiver.requests;
    const untraced = await startTestApp();
    try {
      expect(untraced.tracing).toBeUndefined();
      const id = (await untraced.ok(`mutation { createSession(input: { title: "untraced" }) { id } }`)).createSession.id;
      await untraced.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'hi\n!call clock' } });
      await untraced.services.host.idle();
      expect((await untraced.services.store.log.page(id, -1, 100)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
      await new Promise((r) => setTimeout(r, 100));
      expect(quiet.requests).toBe(0);
      expect(receiver.spans.some((s) => s.attributes['gen_ai.conversation.id'] === id)).toBe(false);
    } finally {
      await untraced.close();
    }

    // Down: the port is closed. Turns complete, flushing does not throw, the failure is logged once, close does not hang.
    await quiet.close();
    const downLog: Array<[string, unknown]> = [];
    const down = await startTestApp({
      tracing: { url: quiet.url, scheduledDelayMillis: 10, timeoutMillis: 300 },
      log: (m, e) => downLog.push([m, e]),
    });
    try {
      const id = (await down.ok(`mutation { createSession(input: { title: "down" }) { id } }`)).createSession.id;
      await down.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'hi\n!call clock' } });
      await down.services.host.idle();
      expect((await down.services.store.log.page(id, -1, 100)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
      await expect(down.tracing!.forceFlush()).resolves.toBeUndefined();
      await waitFor(() => downLog.some(([m]) => m.startsWith('tracing: could not export')), { what: 'the export failure logged' });
      expect(downLog.filter(([m]) => m.startsWith('tracing: could not export'))).toHaveLength(1);
    } finally {
      // Does not hang: a close that did would end this test at its timeout (the export it waits for is itself bounded
      // by shutdownTimeoutMillis); how long it takes is the machine's, not asserted.
      await down.close();
    }
    expect(receiver.requests).toBeGreaterThanOrEqual(before);
  });

  it('a turn a dead holder left open is closed by recovery: its span (the same ids) ends with error status interrupted', async () => {
    const id = await create();
    // What a process that died mid-tool-call leaves behind.
    await app.services.store.append(id, [
      { type: 'inbox/add', data: { inputId: 'in_dead', text: '!call note_write {"key":"k","value":"v"}' } },
      { type: 'inbox/remove', data: { inputId: 'in_dead', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_dead' } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      {
        type: 'model/message',
        data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'call_dead', name: 'note_write', arguments: '{"key":"k","value":"v"}' }] },
      },
    ]);
    await app.services.host.wake(id, 'local');
    await idle();
    expect((await log(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'interrupted' } });
    const spans = await spansOf(id, 2);
    const turn = spans.find((s) => s.name === 'invoke_agent')!;
    expect({ traceId: turn.traceId, spanId: turn.spanId }).toEqual(turnSpanIds(id, 1));
    expect(turn.status).toEqual({ code: STATUS_ERROR, message: 'interrupted' });
    expect(turn.attributes['forkline.recovered']).toBe(true);
    const synthetic = spans.find((s) => s.name === 'execute_tool note_write')!;
    expect(synthetic.attributes).toMatchObject({ 'forkline.synthetic': true, 'forkline.synthetic.cause': 'interrupted', 'gen_ai.tool.call.id': 'call_dead' });
    expect(synthetic.parentSpanId).toBe(turn.spanId);
  });

  it('the standard OTEL_* variables configure the exporter: endpoint (+ /v1/traces), headers, service name', async () => {
    const own = await startOtlpReceiver();
    const saved = { ...process.env };
    Object.assign(process.env, {
      OTEL_EXPORTER_OTLP_ENDPOINT: own.url.replace(/\/v1\/traces$/, ''),
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=secret',
      OTEL_SERVICE_NAME: 'forkline-from-env',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
    });
    try {
      const tracing = new GenAiTracing(tracingOptionsFromEnv(process.env));
      const turn = tracing.turnStarted({ sessionId: 'ses_env', turn: 1, provider: 'scripted', model: 'scripted' });
      turn.toolCall({ step: 1, call: { id: 'c1', name: 'clock', arguments: '{}' } }).end({ status: 'ok', content: 'now' });
      turn.end('completed');
      await tracing.forceFlush();
      const spans = await waitFor(() => (own.spans.length >= 2 ? own.spans : undefined), { what: 'spans exported by env configuration' });
      expect(spans.map((s) => s.name).sort()).toEqual(['execute_tool clock', 'invoke_agent']);
      expect(spans[0].resource).toMatchObject({ 'service.name': 'forkline-from-env', 'deployment.environment': 'test' });
      // Without the capture variable, no content.
      expect(spans.find((s) => s.name === 'execute_tool clock')!.attributes['gen_ai.tool.call.result']).toBeUndefined();
      expect(own.headers.at(-1)?.['x-api-key']).toBe('secret');
      await tracing.shutdown();
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
      await own.close();
    }
  });

  it('a turn closed by shutdown ends with error status interrupted, its unanswered call marked synthetic', async () => {
    const id = await create();
    await send(id, '!call sleep {"ms": 20000}');
    await waitFor(async () => (await log(id)).some((e) => e.type === 'model/message'), { what: 'the sleep call' });
    await app.close();
    const spans = await waitFor(
      () => {
        const s = receiver.spans.filter((x) => x.attributes['gen_ai.conversation.id'] === id);
        return s.some((x) => x.name === 'invoke_agent') ? s : undefined;
      },
      { what: 'the interrupted turn span' },
    );
    const turn = spans.find((s) => s.name === 'invoke_agent')!;
    expect(turn.status).toEqual({ code: STATUS_ERROR, message: 'interrupted' });
    expect(turn.attributes['forkline.turn.end_reason']).toBe('interrupted');
    const synthetic = spans.filter((s) => s.attributes['forkline.synthetic'] === true);
    expect(synthetic).toHaveLength(1);
    expect(synthetic[0].attributes).toMatchObject({
      'forkline.synthetic.cause': 'interrupted',
      'gen_ai.tool.name': 'sleep',
      'forkline.tool.status': 'interrupted',
    });
    expect(synthetic[0].status.code).toBe(STATUS_ERROR);
    app = undefined as unknown as TestApp; // closed
  });
});
