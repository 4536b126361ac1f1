// The OpenAI-compatible provider against a local fake chat-completions server
// that streams SSE like OpenAI, vLLM, Ollama and llama.cpp do.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';

type Reply = { status?: number; chunks?: unknown[]; body?: string };
const replies: Reply[] = [];
const received: Array<{ headers: http.IncomingHttpHeaders; body: any }> = [];
let fake: http.Server;
let app: TestApp;

beforeAll(async () => {
  fake = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    received.push({ headers: req.headers, body: JSON.parse(raw) });
    const reply = replies.shift() ?? { status: 500, body: '{"error":{"message":"no scripted reply"}}' };
    if (reply.status && reply.status !== 200) {
      res.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body ?? '');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const chunk of reply.chunks ?? []) {
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      await new Promise((r) => setTimeout(r, 5));
    }
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  const { port } = fake.address() as AddressInfo;
  app = await startTestApp({ openai: { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-test' } });
});
afterAll(async () => {
  await app.close();
  await new Promise((r) => fake.close(r));
});

const delta = (d: unknown) => ({ choices: [{ index: 0, delta: d }] });

async function session() {
  const r = await app.ok(`mutation { createSession(input: { title: "openai", model: { provider: "openai", model: "fake-model", settings: { temperature: 0.2 } } }) { id } }`);
  return r.createSession.id as string;
}
const send = (id: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
const log = async (id: string) => app.services.store.log.page(id, -1, 1000);

describe('openai provider', () => {
  it('streams text deltas and persists the complete answer', async () => {
    const id = await session();
    const deltas: string[] = [];
    app.turnUpdates.on(id, (u: TurnUpdate) => u.kind === 'TEXT_DELTA' && deltas.push(u.text!));
    replies.push({ chunks: [delta({ role: 'assistant' }), delta({ content: 'Hel' }), delta({ content: 'lo, ' }), delta({ content: 'world' })] });
    await send(id, 'hi');
    await app.services.host.idle();
    expect(deltas).toEqual(['Hel', 'lo, ', 'world']);
    const events = await log(id);
    expect(events.find((e) => e.type === 'model/message')!.data).toEqual({ turn: 1, step: 1, text: 'Hello, world', toolCalls: [] });
    const req = received.at(-1)!;
    expect(req.headers.authorization).toBe('Bearer sk-test');
    expect(req.body).toMatchObject({ model: 'fake-model', stream: true, temperature: 0.2, messages: [{ role: 'user', content: 'hi' }] });
    expect(req.body.tools.map((t: any) => t.function.name)).toEqual(['clock', 'sleep', 'note_read', 'note_write', 'read_file', 'write_file', 'edit_file', 'delete_file', 'list_files']);
  });

  it('accumulates a streamed tool call, runs it, and sends its result back', async () => {
    const id = await session();
    replies.push({
      chunks: [
        delta({ tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'note_', arguments: '' } }] }),
        delta({ tool_calls: [{ index: 0, function: { name: 'write', arguments: '{"key":"k",' } }] }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '"value":"v"}' } }] }),
      ],
    });
    replies.push({ chunks: [delta({ content: 'Saved.' })] });
    await send(id, 'save a note');
    await app.services.host.idle();
    const events = await log(id);
    expect(events.find((e) => e.type === 'model/message')!.data.toolCalls).toEqual([{ id: 'call_abc', name: 'note_write', arguments: '{"key":"k","value":"v"}', effect: 'side-effects' }]);
    expect(events.find((e) => e.type === 'tool/result')!.data).toMatchObject({ callId: 'call_abc', status: 'ok' });
    const second = received.at(-1)!.body;
    expect(second.messages.slice(1)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_abc', type: 'function', function: { name: 'note_write', arguments: '{"key":"k","value":"v"}' } }] },
      { role: 'tool', tool_call_id: 'call_abc', content: 'wrote note "k"' },
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('model text that Postgres cannot store (NUL) is kept readable instead of failing the turn', async () => {
    const id = await session();
    replies.push({ chunks: [delta({ content: 'a\u0000b' })] });
    await send(id, 'binary please');
    await app.services.host.idle();
    const events = await log(id);
    expect(events.find((e) => e.type === 'model/message')!.data.text).toBe('a\uFFFDb');
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('an error response fails the turn; the loop keeps serving', async () => {
    const id = await session();
    replies.push({ status: 429, body: '{"error":{"message":"rate limited"}}' });
    await send(id, 'first');
    await app.services.host.idle();
    let events = await log(id);
    expect(events.slice(-3).map((e) => [e.type, e.data.reason ?? e.data.message])).toEqual([
      ['plugin/agent/error', 'openai provider: HTTP 429: {"error":{"message":"rate limited"}}'],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
    replies.push({ chunks: [delta({ content: 'recovered' })] });
    await send(id, 'second');
    await app.services.host.idle();
    events = await log(id);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  });
});
