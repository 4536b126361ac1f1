// Call ids and tool names from outside, as each provider is sent them
// (docs/agents.md "Ids and names on the wire"): a recording's history holds ids
// with spaces, control characters and non-Latin letters, an id of 150
// characters, an id of 38 reused in the next step (its `_t1s3` would make it
// 43), an id that is exactly another's wire form, and a call of a tool whose
// name has a space and a dot; two real MCP servers list tools named with dots,
// slashes, spaces, umlauts and 100 characters, the same names on both, a
// built-in's name, and one name that is exactly another tool's wire form; the
// model answers with an id holding spaces and a non-Latin letter. Each of the four
// wire formats forkline speaks goes through the AI SDK's own provider package
// to a fake server refusing what the real API refuses (tests/helpers/provider-rules.ts):
// every request must be accepted, and the answer's call must land in the log
// as the call of the right tool, under its own id, answered by that tool. (The
// recording's first step makes two calls: Gemini takes their results only as
// one turn of two parts.)
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { answers, refusingProviders, toolsOffered, wireRefusal, type Provider } from '../helpers/provider-rules.ts';

type Body = any;
const SERVER = fileURLToPath(new URL('../fixtures/mcp/odd-names-server.mjs', import.meta.url));
const digest = (s: string) => createHash('sha256').update(s).digest('base64url').slice(0, 16);

/** The call ids a request's history carries, in order (Gemini's format has none). */
const idsSent: Record<Provider, (b: Body) => string[]> = {
  openai: (b) => b.messages.flatMap((m: any) => (m.tool_calls ?? []).map((c: any) => c.id)),
  'openai-responses': (b) => b.input.filter((i: any) => i.type === 'function_call').map((i: any) => i.call_id),
  anthropic: (b) =>
    b.messages
      .flatMap((m: any) => (Array.isArray(m.content) ? m.content : []))
      .filter((p: any) => p.type === 'tool_use')
      .map((p: any) => p.id),
  google: () => [],
};

/** Ids from outside: control characters and non-Latin letters, 150 characters, 38 reused, and one that is the first one's wire form. */
const HOSTILE_ID = 'call 1 ✓\u0007';
const LONG_ID = 'k'.repeat(150);
const REUSED_ID = 'x'.repeat(38);
const CRAFTED_ID = `call_1____${digest(HOSTILE_ID)}`;
/** The id the model's answer gives its call. */
const MODEL_ID = 'call odd ✗ 1';

const at = (seq: number) => new Date(Date.UTC(2026, 11, 6, 10, 0, seq)).toISOString();
function recording(provider: Provider): string {
  const step = (n: number, calls: Array<[string, string]>): Array<[string, unknown]> => [
    ['step/start', { turn: 1, step: n }],
    ['model/message', { turn: 1, step: n, text: '', toolCalls: calls.map(([id, name]) => ({ id, name, arguments: '{}' })) }],
    ...calls.map(([id, name], i): [string, unknown] => [
      'tool/result',
      { turn: 1, step: n, callId: id, resultId: `res_${n}_${i}`, status: 'ok', content: `${name} of step ${n}`, name },
    ]),
    ['step/end', { turn: 1, step: n, reason: 'completed' }],
  ];
  const events: Array<[string, unknown]> = [
    ['session/model', { provider, model: 'fake-model' }],
    ['inbox/add', { inputId: 'in_1', text: 'look around' }],
    ['inbox/remove', { inputId: 'in_1', reason: 'taken' }],
    ['turn/start', { turn: 1, inputId: 'in_1' }],
    ...step(1, [
      [HOSTILE_ID, 'odd__files.read'],
      [LONG_ID, 'mystery tool.v2'],
    ]),
    ...step(2, [[REUSED_ID, 'odd__a/b']]),
    ...step(3, [[REUSED_ID, 'odd__ümlaut']]),
    ...step(4, [[CRAFTED_ID, 'odd__has space']]),
    ['step/start', { turn: 1, step: 5 }],
    ['model/message', { turn: 1, step: 5, text: 'looked', toolCalls: [] }],
    ['step/end', { turn: 1, step: 5, reason: 'completed' }],
    ['turn/end', { turn: 1, reason: 'completed' }],
  ];
  const header = { format: 'forkline.recording', version: 4, session: { id: `ses_wire_${provider}`, title: 'odd ids' } };
  return [header, ...events.map(([type, data], seq) => ({ seq, type, data, createdAt: at(seq) }))].map((l) => JSON.stringify(l)).join('\n') + '\n';
}

let app: TestApp;
let fake: Awaited<ReturnType<typeof refusingProviders>>;
let received: typeof fake.received;
let dir: string;
/** What the fake model answers a request with: its SSE events. */
let answer: Parameters<typeof refusingProviders>[0];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-wire-names-'));
  fake = await refusingProviders((provider, body, n) => answer(provider, body, n));
  received = fake.received;
  const base = fake.base;
  const server = (name: string) => ({ command: process.execPath, args: [SERVER], env: { ODD_SERVER: name } });
  app = await startTestApp({
    providers: {
      openai: { baseUrl: `${base}/openai/v1`, apiKey: 'sk-openai' },
      anthropic: { baseUrl: `${base}/anthropic/v1`, apiKey: 'sk-anthropic' },
      google: { baseUrl: `${base}/google/v1beta`, apiKey: 'sk-google' },
    },
    modelRetries: { maxRetries: 0, initialDelayMs: 1, maxDelayMs: 1 },
    mcp: parseMcpConfig(JSON.stringify({ mcpServers: { odd: server('odd'), twin: server('twin') } })),
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await fake?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe.each(Object.keys(wireRefusal) as Provider[])('%s: ids and names from outside, on the wire and back', (provider) => {
  it('every request is one the API accepts; the answer calls the right tool, recorded under its own id and name', async () => {
    const { importRecording } = await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording(provider) });
    const id = importRecording.id as string;
    let offered: Array<[string, string]> = [];
    answer = (_p, body, n) => {
      if (n > 1) return answers[provider].text('done');
      offered = toolsOffered[provider](body);
      // The model calls the tool described as odd's files.read, by the name it was offered under, with an id of spaces and a non-Latin letter.
      const name = offered.find(([, d]) => d === 'the tool files.read of odd')?.[0] ?? 'missing';
      return answers[provider].call({ id: MODEL_ID, name, arguments: '{"q":"x"}' });
    };
    const from = received.length;
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'read it' } });
    await app.services.host.idle();

    const sent = received.slice(from);
    expect(sent.map((r) => r.refusal)).toEqual([undefined, undefined]);
    // The tools: each wire name once; the one two tools would share goes to the first listed (the other is not offered).
    const names = offered.map(([n]) => n);
    expect(new Set(names).size).toBe(names.length);
    for (const server of ['odd', 'twin']) {
      expect(offered.filter(([, d]) => d.endsWith(`of ${server}`)).map(([, d]) => d)).toEqual(
        ['files.read', 'a/b', 'has space', 'ümlaut', 'n'.repeat(100), 'read_file'].map((n) => `the tool ${n} of ${server}`),
      );
    }
    expect(names).toContain(`odd__files_read_${digest('odd__files.read')}`);
    expect(names.filter((n) => n === 'read_file')).toHaveLength(1); // the built-in; odd's is odd__read_file
    if (provider !== 'google') {
      // History: each id sent once, in a form the API takes; the 38-character id reused in step 3 cut to make room for its step.
      const ids = idsSent[provider](sent[0].body);
      expect(ids).toEqual([
        `call_1____${digest(HOSTILE_ID)}`,
        `${'k'.repeat(23)}_${digest(LONG_ID)}`,
        REUSED_ID,
        `${'x'.repeat(35)}_t1s3`,
        `${CRAFTED_ID}_t1s4`,
      ]);
    }

    // Back in the log: the call of odd's files.read under the id the model gave it, run by that server's tool.
    const events = await app.services.store.log.page(id, -1, 1000);
    const message = events.filter((e) => e.type === 'model/message').at(-2)!;
    const [call] = anyData(message).toolCalls;
    expect(call.name).toBe('odd__files.read');
    if (provider !== 'google') expect(call.id).toBe(MODEL_ID); // Gemini's calls have no ids: the SDK gives them one
    const result = events.find((e) => e.type === 'tool/result' && anyData(e).callId === call.id && anyData(e).turn === 2)!;
    expect(anyData(result)).toMatchObject({ status: 'ok', content: 'files.read ran' });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  }, 60_000);
});
