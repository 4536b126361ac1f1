// A model provider's answer is outside input (docs/operations.md "Threat
// model"): the AI SDK's own provider packages, pointed at a fake server that
// speaks each API's wire format and misbehaves, through GraphQL. What one
// model call's response may make the process hold — its bytes, its silences,
// its error bodies — is bounded, and the turn ends saying which limit it broke;
// malformed tool calls are recorded and refused, never run, never fatal to the
// turn; token counts no answer can have are not recorded, and sums stay readable.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drained } from '../../src/http/drained.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { providersAt } from '../helpers/fake-provider.ts';
import { anyData } from '../helpers/event-data.ts';
import { anthropicStart, anthropicStop, anthropicText, chatChunk, sse } from '../helpers/provider-sse.ts';
import { waitFor } from '../helpers/wait.ts';

const MAX_RESPONSE_BYTES = 256 * 1024;
const IDLE_TIMEOUT_MS = 1500;

type Handler = (res: http.ServerResponse, sent: { bytes: number; closed: boolean }) => Promise<void>;
const handlers: Handler[] = [];
const served: Array<{ path: string; body: any; sent: { bytes: number; closed: boolean } }> = [];
let fake: http.Server;
let app: TestApp;

/** Writes `next()` for as long as the client reads, counting what it took. */
async function endless(res: http.ServerResponse, sent: { bytes: number; closed: boolean }, next: () => string) {
  while (!sent.closed) {
    const chunk = next();
    sent.bytes += Buffer.byteLength(chunk);
    if (!res.write(chunk)) await drained(res);
  }
}

const stream = (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });

/** The misbehaviours, one per provider's wire format: each streams without end. */
const ENDLESS: Array<{ provider: string; what: string; seen: string; handler: Handler }> = [
  {
    provider: 'openai',
    what: 'text deltas forever',
    seen: 'x'.repeat(1000),
    handler: async (res, sent) => {
      stream(res);
      await endless(res, sent, () => sse(chatChunk({ content: 'x'.repeat(1000) })));
    },
  },
  {
    provider: 'openai-compatible',
    what: 'one delta that never ends',
    seen: 'before ',
    handler: async (res, sent) => {
      stream(res);
      res.write(sse(chatChunk({ role: 'assistant', content: 'before ' })));
      res.write(`data: ${JSON.stringify(chatChunk({ content: '' })).slice(0, -40)}`);
      await endless(res, sent, () => 'y'.repeat(64 * 1024));
    },
  },
  {
    provider: 'openai-responses',
    what: 'reasoning deltas forever',
    seen: 'Thinking out loud',
    handler: async (res, sent) => {
      stream(res);
      res.write(sse({ type: 'response.created', response: { id: 'resp_1', created_at: 1, model: 'fake-model' } }));
      res.write(sse({ type: 'response.output_item.added', output_index: 0, item: { type: 'message', id: 'msg_1' } }));
      res.write(sse({ type: 'response.output_text.delta', item_id: 'msg_1', delta: 'Thinking out loud' }));
      res.write(sse({ type: 'response.output_item.added', output_index: 1, item: { type: 'reasoning', id: 'rs_1', summary: [] } }));
      await endless(res, sent, () => sse({ type: 'response.reasoning_summary_text.delta', item_id: 'rs_1', summary_index: 0, delta: 'hmm '.repeat(250) }));
    },
  },
  {
    provider: 'anthropic',
    what: 'tool-call arguments without end',
    seen: '',
    handler: async (res, sent) => {
      stream(res);
      res.write(anthropicStart());
      res.write(
        sse(
          { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'note_write', input: {} } },
          'content_block_start',
        ),
      );
      res.write(
        sse({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"key":"k","value":"' } }, 'content_block_delta'),
      );
      await endless(res, sent, () =>
        sse({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: 'z'.repeat(1000) } }, 'content_block_delta'),
      );
    },
  },
  {
    provider: 'google',
    what: 'text forever',
    seen: 'g'.repeat(1000),
    handler: async (res, sent) => {
      stream(res);
      await endless(res, sent, () => sse({ candidates: [{ content: { role: 'model', parts: [{ text: 'g'.repeat(1000) }] } }] }));
    },
  },
];

beforeAll(async () => {
  fake = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const sent = { bytes: 0, closed: false };
    res.on('close', () => (sent.closed = true));
    served.push({ path: req.url!, body: JSON.parse(raw), sent });
    const handler = handlers.shift();
    if (!handler) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"no scripted reply"}}');
    await handler(res, sent).catch(() => {});
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  app = await startTestApp({
    providers: {
      ...providersAt(base),
      limits: { maxResponseBytes: MAX_RESPONSE_BYTES, idleTimeoutMs: IDLE_TIMEOUT_MS },
    },
    modelRetries: { maxRetries: 1, initialDelayMs: 20, maxDelayMs: 50 },
    // Far beyond what a bounded call takes: a test that ends by it has not been bounded by the limit it tests.
    maxTurnMs: 20_000,
  });
});
afterAll(async () => {
  await app?.close();
  fake.closeAllConnections();
  await new Promise((r) => fake.close(r));
});

const { create, turn: send, log, tail } = agentTurns(() => app, 'hostile');
const session = (provider: string) => create({ provider, model: 'fake-model' });

const okText =
  (text: string): Handler =>
  async (res) => {
    stream(res);
    res.write(sse(chatChunk({ role: 'assistant', content: text })));
    res.write(sse(chatChunk({}, 'stop', { usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })));
    res.end(sse('[DONE]'));
  };

describe("a model call's response is bounded in bytes", () => {
  it.each(ENDLESS)('$provider: $what is cut at the limit; the turn fails saying so, keeping the text the user saw', async ({ provider, seen, handler }) => {
    const id = await session(provider);
    handlers.push(handler);
    const started = Date.now();
    await send(id, 'go');
    const sent = served.at(-1)!.sent;
    await waitFor(() => sent.closed, { what: 'the provider connection to close' });
    // What the provider got to send before the connection went: the limit, plus what the sockets buffer.
    expect(sent.bytes).toBeLessThan(32 * 1024 * 1024);
    console.log(`${provider}: cut after ${sent.bytes} bytes, the turn over in ${Date.now() - started} ms`);
    const message = `${provider} provider: the response passed ${MAX_RESPONSE_BYTES} bytes (FORKLINE_MODEL_MAX_RESPONSE_BYTES) and was cut off`;
    expect(await tail(id, 4)).toEqual([
      ...(seen ? [['model/message', expect.stringMatching(new RegExp(`^${seen}`))]] : [['step/start', undefined]]),
      ['plugin/agent/error', message],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
    // Nothing of a call cut off mid-arguments runs.
    expect((await log(id)).some((e) => e.type === 'tool/result')).toBe(false);
    const turn = await app.ok(`query($id: ID!) { session(id: $id) { status turns(last: 1) { reason error } } }`, { id });
    expect(turn.session).toEqual({ status: 'IDLE', turns: [{ reason: 'failed', error: message }] });
  });
});

describe('a model call that goes silent is given up', () => {
  it('headers, then nothing: the turn fails after the idle timeout, the slot is free and the next turn runs', async () => {
    const id = await session('openai');
    handlers.push(async (res, sent) => {
      stream(res);
      res.write(sse(chatChunk({ role: 'assistant', content: 'half an ans' })));
      await new Promise<void>((r) => (sent.closed ? r() : res.once('close', r)));
    });
    // Given up by the idle timeout (its error says so below), not held until the test's own timeout.
    await send(id, 'go');
    await waitFor(() => served.at(-1)!.sent.closed, { what: 'the provider connection to close' });
    expect(await tail(id, 4)).toEqual([
      ['model/message', 'half an ans'],
      ['plugin/agent/error', `openai provider: nothing arrived for ${IDLE_TIMEOUT_MS} ms (FORKLINE_MODEL_IDLE_TIMEOUT_MS): the call was given up`],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
    handlers.push(okText('awake'));
    await send(id, 'again');
    expect(await tail(id, 1)).toEqual([['turn/end', 'completed']]);
  });

  it('no headers at all: the same', async () => {
    const id = await session('anthropic');
    handlers.push(async (res, sent) => {
      await new Promise<void>((r) => (sent.closed ? r() : res.once('close', r)));
    });
    await send(id, 'go');
    expect(await tail(id, 3)).toEqual([
      ['plugin/agent/error', `anthropic provider: nothing arrived for ${IDLE_TIMEOUT_MS} ms (FORKLINE_MODEL_IDLE_TIMEOUT_MS): the call was given up`],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
  });
});

describe("a provider's error body is read only in part", () => {
  it('a 500 whose body never ends: each attempt reads a bounded part, the retries are spent, the turn fails with the status', async () => {
    const id = await session('openai');
    const endlessError: Handler = async (res, sent) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.write('{"error":{"message":"');
      await endless(res, sent, () => 'e'.repeat(64 * 1024));
    };
    handlers.push(endlessError, endlessError);
    await send(id, 'go');
    // Each attempt's part of the body counted (the time it took is not asserted: a loaded machine's, not the code's).
    for (const s of served.slice(-2)) {
      await waitFor(() => s.sent.closed, { what: 'the provider connection to close' });
      expect(s.sent.bytes).toBeLessThan(32 * 1024 * 1024);
    }
    const events = await log(id);
    expect(events.filter((e) => e.type === 'plugin/agent/retry').map((e) => anyData(e).status)).toEqual([500]);
    expect(await tail(id, 3)).toEqual([
      ['plugin/agent/error', expect.stringMatching(/^openai provider: HTTP 500: /)],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
  });
});

/** An Anthropic messages step making these calls, as the provider's server sent them (ids and names unchecked). */
const toolCalls =
  (calls: Array<{ id: string; name: string; arguments: string }>): Handler =>
  async (res) => {
    stream(res);
    res.write(anthropicStart());
    calls.forEach((c, index) => {
      res.write(sse({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } }, 'content_block_start'));
      res.write(sse({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: c.arguments } }, 'content_block_delta'));
      res.write(sse({ type: 'content_block_stop', index }, 'content_block_stop'));
    });
    res.end(anthropicStop('tool_use', 7).join(''));
  };

const answering =
  (text: string): Handler =>
  async (res) => {
    stream(res);
    res.end(anthropicText([text]).join(''));
  };

describe('malformed tool calls', () => {
  it('every call of a step is recorded before any runs; a repeated, unstorable or unknown one is answered with an error, never run; the turn goes on', async () => {
    const id = await session('anthropic');
    handlers.push(
      toolCalls([
        { id: 'call_1', name: 'note_write', arguments: '{"key":"a","value":"1"}' },
        { id: 'call_1', name: 'note_write', arguments: '{"key":"b","value":"2"}' },
        { id: 'c'.repeat(300), name: 'clock', arguments: '{}' },
        { id: 'call_4', name: 'n'.repeat(300), arguments: '{}' },
        { id: 'call_5', name: 'rm_rf', arguments: '{}' },
        { id: 'call_6', name: 'note_write', arguments: '{"key":' },
        { id: 'call_7', name: 'note_write', arguments: '{"key":"c"}' },
      ]),
      answering('done'),
    );
    await send(id, 'go');
    const events = await log(id);
    const message = events.find((e) => e.type === 'model/message')!;
    const ids = anyData(message).toolCalls.map((c: { id: string }) => c.id);
    expect(ids).toEqual(['call_1', 'call_2', 'call_3', 'call_4', 'call_5', 'call_6', 'call_7']);
    expect(anyData(message).toolCalls[3].name).toBe('n'.repeat(200));
    // The calls are in the log before the first result.
    expect(events.findIndex((e) => e.type === 'tool/result')).toBeGreaterThan(events.indexOf(message));
    const results = new Map(events.filter((e) => e.type === 'tool/result').map((e) => [anyData(e).callId, [anyData(e).status, anyData(e).content]]));
    expect(Object.fromEntries(results)).toEqual({
      call_1: ['ok', 'wrote note "a"'],
      call_2: ['error', 'not run: the model gave it the id of another call of this step (call_1)'],
      call_3: ['error', 'not run: the model gave it an id of 300 characters (1-200 allowed)'],
      call_4: ['error', 'not run: the model named a tool of 300 characters (1-200 allowed)'],
      call_5: ['error', 'the model was offered no tool named "rm_rf": the call did not run'],
      call_6: ['error', expect.stringMatching(/^arguments are not valid JSON/)],
      call_7: ['error', expect.stringMatching(/^invalid arguments: value/)],
    });
    expect(await tail(id, 1)).toEqual([['turn/end', 'completed']]);
    const notes = await app.ok(`query($id: ID!) { session(id: $id) { workspace { key value } } }`, { id });
    expect(notes.session.workspace).toEqual([{ key: 'a', value: '1' }]);
    // The next request gives the provider each recorded call with its result, by the recorded ids.
    const parts = served.at(-1)!.body.messages.flatMap((m: any) => (Array.isArray(m.content) ? m.content : []));
    expect(parts.filter((p: any) => p.type === 'tool_use').map((p: any) => p.id)).toEqual(ids);
    // Refused calls (a name no tool offered too) were answered first (with the answer), the others as they ran.
    expect(parts.filter((p: any) => p.type === 'tool_result').map((p: any) => p.tool_use_id)).toEqual([
      'call_2',
      'call_3',
      'call_4',
      'call_5',
      'call_1',
      'call_6',
      'call_7',
    ]);
  });
});

/** An Anthropic answer reporting these token counts and stop reason, as raw JSON (numbers JSON.stringify cannot write). */
const reporting =
  (input: string, output: string, stop = 'end_turn'): Handler =>
  async (res) => {
    stream(res);
    res.write(
      `event: message_start\ndata: {"type":"message_start","message":{"id":"msg_u","type":"message","role":"assistant","model":"fake-model","content":[],"stop_reason":null,"usage":{"input_tokens":${input},"output_tokens":1}}}\n\n`,
    );
    res.write(sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'));
    res.write(sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'counted' } }, 'content_block_delta'));
    res.write(sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'));
    res.write(
      `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"${stop}","stop_sequence":null},"usage":{"output_tokens":${output}}}\n\n`,
    );
    res.end(sse({ type: 'message_stop' }, 'message_stop'));
  };

describe("a provider's token counts", () => {
  it('a count no model could have (1e308, negative, fractional) is not recorded; the answer is; sums past GraphQL Int stay exact (SafeInt)', async () => {
    const id = await session('anthropic');
    const most = '1000000000'; // MAX_REPORTED_TOKENS
    handlers.push(reporting('1e308', '-5', 'space_laser'), reporting('2.5', '1e12'), reporting(most, most), reporting(most, most), reporting(most, most));
    for (const text of ['one', 'two', 'three', 'four', 'five']) await send(id, text);
    const messages = (await log(id)).filter((e) => e.type === 'model/message').map((e) => anyData(e));
    expect(messages.map((m) => [m.text, m.usage])).toEqual([
      ['counted', undefined],
      ['counted', undefined],
      ...Array(3).fill(['counted', { inputTokens: 1e9, outputTokens: 1e9 }]),
    ]);
    const r = await app.ok(`query($id: ID!) { session(id: $id) { totals { inputTokens outputTokens } turns(last: 5) { reason usage { inputTokens } } } }`, {
      id,
    });
    expect(r.session.totals).toEqual({ inputTokens: 3_000_000_000, outputTokens: 3_000_000_000 });
    expect(r.session.turns).toEqual([
      { reason: 'completed', usage: null },
      { reason: 'completed', usage: null },
      ...Array(3).fill({ reason: 'completed', usage: { inputTokens: 1e9 } }),
    ]);
  });
});
