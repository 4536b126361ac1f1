// Text from outside reaches live subscribers through NOTIFY payloads, which Postgres refuses at 8,000 bytes
// (host/live/turn-update-relay.ts): a model's text deltas (the AI SDK's OpenAI-compatible provider against a fake
// server speaking Chat Completions SSE) and an MCP server's progress message (an SDK `Server` over stdio) made of
// control characters, each 6 bytes of JSON (`\u0001`). Pieces of 1,500 characters made payloads of 9,000 to 12,000
// bytes: Postgres refused them with every other notification of their batch, and subscribers never saw the text.
import fs from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { startFakeProvider, type FakeProvider } from '../helpers/fake-provider.ts';
import { chatText } from '../helpers/provider-sse.ts';
import { openSubscriptions, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';

const FLOOD = fileURLToPath(new URL('../fixtures/mcp/flood-server.mjs', import.meta.url));
let fake: FakeProvider;
let app: TestApp;
let dir: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-turn-payloads-'));
  fake = await startFakeProvider();
  app = await startTestApp({
    providers: { openaiCompatible: { baseUrl: `${fake.origin}/compat/v1`, apiKey: 'sk-compat' } },
    mcp: parseMcpConfig(JSON.stringify({ mcpServers: { flood: { command: process.execPath, args: [FLOOD] } } })),
  });
});
afterAll(async () => {
  await app?.close();
  await fake?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

type Update = { kind: string; text: string | null };

/**
 * A sessionTurns subscriber of a new session (listening before anything is sent), a message sent to it, and its
 * updates to the turn's end; `meanwhile` runs once an update of `kind` has arrived.
 */
async function followed(text: string, opts: { model?: { provider: string; model: string }; kind?: string; meanwhile?: () => void } = {}) {
  const r = await app.ok(`mutation($m: ModelConfigInput) { createSession(input: { title: "payloads", model: $m }) { id } }`, { m: opts.model ?? null });
  const id = r.createSession.id as string;
  const open = await openSubscriptions(app.url);
  const updates = subscribeWs<{ sessionTurns: Update }>(app.url, 'subscription($id: ID!) { sessionTurns(sessionId: $id) { kind text } }', { id });
  await subscriptionsOpened(app.url, open, 1);
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
  if (opts.kind) {
    await updates.until((items) => items.some((u) => u.sessionTurns.kind === opts.kind), `a ${opts.kind} update`, 20_000);
    opts.meanwhile?.();
  }
  await updates.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'the turn to end', 60_000);
  await updates.close();
  return updates.items.map((u) => u.sessionTurns);
}

describe('text of control characters reaches live subscribers', () => {
  it("a model's text deltas of 2,500 control characters and escapes each: every character arrives, in order", async () => {
    const text = '\u0001\u001b[31m'.repeat(1000) + '\u0007'.repeat(2500);
    const chunks = Array.from({ length: Math.ceil(text.length / 2500) }, (_, i) => text.slice(i * 2500, (i + 1) * 2500));
    fake.handlers.push(async (res: http.ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(chatText(chunks, { input: 5, output: 5 }).join(''));
    });
    const updates = await followed('hi', { model: { provider: 'openai-compatible', model: 'fake-model' } });
    const deltas = updates.filter((u) => u.kind === 'TEXT_DELTA').map((u) => u.text ?? '');
    // Compared by length, then whole: a diff of control characters would be printed to the terminal as they are.
    expect(deltas.join('').length).toBe(text.length);
    expect(deltas.join('') === text).toBe(true);
    expect(updates.at(-1)!.kind).toBe('TURN_ENDED');
  });

  it("an MCP server's progress message of 2,000 control characters arrives cut to what a payload holds", async () => {
    // The call is held open until its progress has arrived: progress of a call that has ended is not shown.
    const answer = path.join(dir, 'answer');
    const args = { count: 1, bytes: 2000, char: '\u0001', until: answer };
    const updates = await followed(`!call flood__notify ${JSON.stringify(args)}`, { kind: 'TOOL_PROGRESS', meanwhile: () => fs.writeFileSync(answer, '') });
    const progress = updates.filter((u) => u.kind === 'TOOL_PROGRESS');
    expect(progress).toHaveLength(1);
    expect(progress[0].text === '\u0001'.repeat(1000)).toBe(true);
    expect(updates.some((u) => u.kind === 'TOOL_FINISHED')).toBe(true);
  });
});
