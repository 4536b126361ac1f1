// The Python runner SDK (packages/python/forkline_runner) and tool names no
// provider takes (docs/runners.md#wire-names): each serve is a `python3`
// process (tests/fixtures/runners/python_wire_names.py) whose model sends the
// request it is handed to a fake Chat Completions API refusing what the real
// one refuses (tests/helpers/provider-rules.ts), against a real forkline server.
// - An imported session whose history calls `files.read v2`, and a new one
//   whose runner has that tool: the model is handed (and the provider sent)
//   the history's call and the tool under the form forkline's own agent sends;
//   the model's call of that form is recorded under the tool's own name and run.
// - Two tools whose forms meet (one named as the other's form): the first is
//   offered; a hostile model naming the other (by its own name, offered by no
//   request) or a name in no map runs nothing, and the call is recorded as one
//   of a tool the runner does not have.
// And call ids a model gives (docs/runners.md#call-ids): the old code wrote a
// reply's calls as given, so an answer holding one id twice, an id over 200
// characters or one with a NUL was refused by the log and the turn failed
// with nothing run; now each is recorded as forkline's own agent records it:
// under `call_<position>`, answered at once with why, never run (the first of
// two sharing an id runs). A call repeating an id of the history runs under a
// fresh one.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { answerOf, runnerSessions, type Call } from '../helpers/call-id-sessions.ts';
import { answers, refusingProviders } from '../helpers/provider-rules.ts';
import { recordingCalling } from '../helpers/wire-name-sessions.ts';
import { toStorableText } from '../../src/core/storable.ts';

const digest = (name: string) => createHash('sha256').update(name).digest('base64url').slice(0, 16);
const TOOL = 'files.read v2';
const WIRE_TOOL = `files_read_v2_${digest(TOOL)}`;

let app: TestApp;
let fake: Awaited<ReturnType<typeof refusingProviders>>;
/** What the fake model answers the n-th request of a test with. */
let answer: (body: any) => string[];
const started: ChildProcess[] = [];

beforeAll(async () => {
  fake = await refusingProviders((_provider, body) => answer(body));
  app = await startTestApp();
}, 60_000);
afterAll(async () => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await app?.close();
  await fake?.close();
});

/** Serves the session once with the Python SDK and `tools`; the process must end on its own. */
async function serve(id: string, pool: string, tools: string[]): Promise<any[]> {
  const child = spawn('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_wire_names.py')], {
    env: {
      ...process.env,
      PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'),
      FORKLINE_URL: app.url,
      PROVIDER_URL: fake.base,
      SESSION_ID: id,
      POOL: pool,
      TOOLS: JSON.stringify(tools),
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
const fresh = async (pool: string) => {
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await send(id, 'read');
  return id;
};
/** A session of `pool` imported from a recording whose turn 1 called `files.read v2`, with a message waiting. */
async function imported(pool: string): Promise<string> {
  const r = recordingCalling({ id: `ses_${pool}`, pool, tool: TOOL });
  const id = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r })).importRecording.id as string;
  await send(id, 'read b');
  return id;
}
const log = (id: string) => app.services.store.log.page(id, -1, 1000);
/** The fake model: calls `name(offered)` with `{"path": "b"}` first, then answers "done". */
function calling(name: (offered: string[]) => string) {
  const from = fake.received.length;
  answer = (body) => {
    if (fake.received.slice(from).filter((r) => !r.refusal).length > 1) return answers.openai.text('done');
    return answers.openai.call({ id: 'call_2', name: name((body.tools ?? []).map((t: any) => t.function.name)), arguments: '{"path":"b"}' });
  };
  return () => fake.received.slice(from);
}
const byDescription = (offered: string[]) => offered.find((n) => n !== 'lookup') ?? 'missing';

describe('tool names on the wire with the Python runner SDK', () => {
  it.each([
    ['an imported session whose history calls it', imported],
    ['a new session', fresh],
  ])(
    "offers a tool providers refuse under its wire name in %s, and records and runs the model's call under its own",
    async (_what, create) => {
      const pool = `py-wire-${create === fresh ? 'fresh' : 'imported'}`;
      const id = await create(pool);
      const sent = calling(byDescription);
      const lines = await serve(id, pool, [TOOL, 'lookup']);

      expect(sent().map((r) => r.refusal)).toEqual([undefined, undefined]);
      for (const { body } of sent()) expect(JSON.stringify(body)).not.toContain(TOOL);
      expect(lines.find((l) => l.offered).offered.sort()).toEqual([WIRE_TOOL, 'lookup'].sort());
      expect(lines.filter((l) => l.ran)).toEqual([{ ran: TOOL, args: { path: 'b' } }]);
      const events = await log(id);
      const message = events.filter((e) => e.type === 'model/message' && anyData(e).toolCalls.length).at(-1)!;
      expect(anyData(message).toolCalls).toEqual([{ id: 'call_2', name: TOOL, arguments: '{"path":"b"}', effect: 'side-effects' }]);
      expect(anyData(events.find((e) => e.type === 'tool/result' && anyData(e).callId === 'call_2')!)).toMatchObject({
        name: TOOL,
        status: 'ok',
        content: 'read b',
      });
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    },
    60_000,
  );

  it.each([
    ['the other tool by its own name', 'files.read'],
    ['the first tool by its own name, not its form', TOOL],
    ['a name in no map', 'files_read_nothing'],
  ])(
    'of two tools whose forms meet, offers the first; a model naming %s runs nothing',
    async (_what, named) => {
      const FORM = `files_read_${digest('files.read')}`;
      const pool = `py-twins-${named.length}`;
      const id = await fresh(pool);
      const sent = calling(() => named);
      // FORM is declared first, so it is offered: `files.read` would go on the wire by the same name.
      const lines = await serve(id, pool, [FORM, 'files.read', TOOL]);

      expect(sent().map((r) => r.refusal)).toEqual([undefined, undefined]);
      expect(lines.find((l) => l.offered).offered).toEqual([FORM, WIRE_TOOL]);
      expect(lines.filter((l) => l.ran)).toEqual([]);
      const events = await log(id);
      expect(anyData(events.find((e) => e.type === 'model/message')!).toolCalls).toMatchObject([{ id: 'call_2', name: named }]);
      expect(anyData(events.find((e) => e.type === 'tool/result')!)).toMatchObject({
        callId: 'call_2',
        status: 'error',
        content: `the model was offered no tool named ${JSON.stringify(named)}: the call did not run`,
      });
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    },
    60_000,
  );
});

describe('call ids with the Python runner SDK', () => {
  const { session, send: sendTo, logOf } = runnerSessions(() => app, 'py-call-ids');
  /** The fake model's answers, one a request: each answer's calls, else its text. */
  const scripted = (script: Array<Call[] | string>) => (answer = () => answerOf('openai', script.shift() ?? 'done'));
  const read = (id: string, p: string): Call => ({ id, name: 'read', arguments: JSON.stringify({ path: p }) });

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
      scripted([calls, 'done']);
      const lines = await serve(s.id, s.pool, ['read']);

      expect(lines.filter((l) => l.ran).map((l) => l.args.path)).toEqual(ranPaths);
      const log = await logOf(s.id);
      expect(log.find((e) => e.type === 'model/message')!.data.toolCalls.map((c: Call) => c.id)).toEqual(ids);
      for (const [id, text] of Object.entries(why))
        expect(log.find((e) => e.type === 'tool/result' && e.data.callId === id)!.data).toMatchObject({ status: 'error', content: `not run: ${text}` });
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    },
    60_000,
  );

  it("stores call arguments holding a NUL or a lone surrogate as forkline's own agent does (U+FFFD): the turn goes on", async () => {
    const s = await session('read');
    const calls = [
      { id: 'call_a', name: 'read', arguments: '{"path":"a\ud800"}' },
      { id: 'call_b', name: 'read', arguments: '{"path":"b\u0000"}' },
    ];
    scripted([calls, 'done']);
    await serve(s.id, s.pool, ['read']);

    const log = await logOf(s.id);
    expect(log.find((e) => e.type === 'model/message')!.data.toolCalls.map((c: Call) => c.arguments)).toEqual(calls.map((c) => toStorableText(c.arguments)));
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it('runs a call repeating an id of the history under a fresh one', async () => {
    const s = await session('read a');
    scripted([[read('call_0', 'a')], 'done']);
    await serve(s.id, s.pool, ['read']);
    await sendTo(s.id, 'read b');
    scripted([[read('call_0', 'b')], 'done']);
    const lines = await serve(s.id, s.pool, ['read']);

    expect(lines.filter((l) => l.ran).map((l) => l.args.path)).toEqual(['b']);
    const log = await logOf(s.id);
    expect(log.filter((e) => e.type === 'model/message').flatMap((e) => e.data.toolCalls.map((c: Call) => c.id))).toEqual(['call_0', 'call_1']);
    expect(log.filter((e) => e.type === 'turn/end').map((e) => e.data.reason)).toEqual(['completed', 'completed']);
  }, 60_000);
});
