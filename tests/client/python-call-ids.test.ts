// The Python runner SDK (packages/python/forkline_runner) and call ids a model
// gives (docs/runners.md#call-ids): each serve is a `python3` process
// (tests/fixtures/runners/python_wire_names.py) whose model sends the request
// it is handed to a fake Chat Completions API and returns the calls it
// answers, against a real forkline server. The old code wrote the reply's
// calls as given, so an answer holding one id twice, an id over 200
// characters or one with a NUL was refused by the log and the turn failed
// with nothing run; now each is recorded as forkline's own agent records it:
// under `call_<position>`, answered at once with why, never run (the first of
// two sharing an id runs). A call repeating an id of the history runs under a
// fresh one.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { chatChunk, sse } from '../helpers/provider-sse.ts';
import { answers, refusingProviders } from '../helpers/provider-rules.ts';

type Call = { id: string; name: string; arguments: string };

let app: TestApp;
let fake: Awaited<ReturnType<typeof refusingProviders>>;
/** What the fake model answers, one a request the provider takes: each answer's calls, else its text. */
let script: Array<Call[] | string> = [];
const started: ChildProcess[] = [];

beforeAll(async () => {
  fake = await refusingProviders(() => {
    const a = script.shift() ?? 'done';
    if (typeof a === 'string') return answers.openai.text(a);
    const calls = a.map((c, i) => ({ index: i, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    return [sse(chatChunk({ role: 'assistant', tool_calls: calls })), sse(chatChunk({}, 'tool_calls')), sse('[DONE]')];
  });
  app = await startTestApp();
}, 60_000);
afterAll(async () => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await app?.close();
  await fake?.close();
});

/** Serves the session once with the Python SDK and a tool `read`; its output lines. */
async function serve(id: string, pool: string): Promise<any[]> {
  const child = spawn('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_wire_names.py')], {
    env: {
      ...process.env,
      PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'),
      FORKLINE_URL: app.url,
      PROVIDER_URL: fake.base,
      SESSION_ID: id,
      POOL: pool,
      TOOLS: JSON.stringify(['read']),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  expect(code, output).toBe(0);
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

const send = (id: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
let pools = 0;
async function session(text: string) {
  const pool = `py-call-ids-${++pools}`;
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await send(id, text);
  return { id, pool };
}
const logOf = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: anyData(e) }));
const read = (id: string, p: string): Call => ({ id, name: 'read', arguments: JSON.stringify({ path: p }) });

describe('call ids with the Python runner SDK', () => {
  it.each([
    [
      'one id twice',
      [read('call_a', 'a'), read('call_a', 'b')],
      ['call_a', 'call_2'],
      ['a'],
      { call_2: 'the model gave it the id of another call of this step (call_a)' },
    ],
    ['an id of 300 characters', [read('c'.repeat(300), 'a')], ['call_1'], [], { call_1: 'the model gave it an id of 300 characters (1-200 allowed)' }],
    ['an id holding a NUL', [read('call\u00001', 'a')], ['call_1'], [], { call_1: 'the model gave it an id holding a NUL character or an unpaired surrogate' }],
  ])(
    'records an answer with %s as forkline does: a refused call answered at once, never run',
    async (_what, calls, ids, ranPaths, why) => {
      const s = await session('read');
      script = [calls, 'done'];
      const lines = await serve(s.id, s.pool);

      expect(lines.filter((l) => l.ran).map((l) => l.args.path)).toEqual(ranPaths);
      const log = await logOf(s.id);
      expect(log.find((e) => e.type === 'model/message')!.data.toolCalls.map((c: Call) => c.id)).toEqual(ids);
      for (const [id, text] of Object.entries(why))
        expect(log.find((e) => e.type === 'tool/result' && e.data.callId === id)!.data).toMatchObject({ status: 'error', content: `not run: ${text}` });
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    },
    60_000,
  );

  it('runs a call repeating an id of the history under a fresh one', async () => {
    const s = await session('read a');
    script = [[read('call_0', 'a')], 'done'];
    await serve(s.id, s.pool);
    await send(s.id, 'read b');
    script = [[read('call_0', 'b')], 'done'];
    const lines = await serve(s.id, s.pool);

    expect(lines.filter((l) => l.ran).map((l) => l.args.path)).toEqual(['b']);
    const log = await logOf(s.id);
    expect(log.filter((e) => e.type === 'model/message').flatMap((e) => e.data.toolCalls.map((c: Call) => c.id))).toEqual(['call_0', 'call_1']);
    expect(log.filter((e) => e.type === 'turn/end').map((e) => e.data.reason)).toEqual(['completed', 'completed']);
  }, 60_000);
});
