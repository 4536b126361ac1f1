// The Python runner SDK (packages/python/forkline_runner, standard library
// only) as a separate `python3` process serving a real forkline server, with a
// fake model and a tool with a side effect that takes seconds. Each step goes
// in two parts (the call before the tool runs): a turn completes; a fork
// taken while the tool runs holds the call and closes it; a runner SIGKILLed
// mid-tool leaves a turn repaired once (interrupted), and the next runner does
// not run the tool again; a user's cancelTurn ends its turn cancelled.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startService, type ServiceProcess } from '../helpers/process.ts';
import { serviceReads } from '../helpers/python-process.ts';
import { waitFor } from '../helpers/wait.ts';

let service: ServiceProcess;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-py-'));
const started: ChildProcess[] = [];

function startPython(name: string, env: Record<string, string> = {}) {
  const effects = path.join(dir, `${name}.effects`);
  fs.writeFileSync(effects, '');
  const child = spawn('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_runner.py')], {
    env: {
      ...process.env,
      PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'),
      FORKLINE_URL: service.url,
      POOL: 'py',
      RUNNER_ID: name,
      EFFECT_LOG: effects,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  started.push(child);
  return { child, output: () => out, effects: () => fs.readFileSync(effects, 'utf8').split('\n').filter(Boolean) };
}

const { gql, events } = serviceReads(() => service.url);
const send = (id: string, text: string) =>
  gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text });
const create = async (pool: string) =>
  (await gql(`mutation($pool: String!) { createSession(input: {runner: $pool}) { id } }`, { pool })).createSession.id as string;
const turnEnds = (evs: any[]) => evs.filter((e) => e.type === 'turn/end');

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await service?.stop();
});

describe('the Python runner SDK', () => {
  let runner: ReturnType<typeof startPython>;
  beforeAll(() => {
    runner = startPython('py-1', { TOOL_SECONDS: '4' });
  });

  it('runs a turn: the call, its result, the answer', async () => {
    const id = await create('py');
    await send(id, 'ada@example.com');
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the turn', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
    });
    const evs = (await events(id)).filter((e: any) => e.type !== 'session/runner-tools');
    expect(evs.map((e: any) => e.type)).toEqual([
      'inbox/add',
      'inbox/remove',
      'turn/start',
      'step/start',
      'model/message',
      'tool/result',
      'step/end',
      'step/start',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    expect(evs[4].data.toolCalls).toMatchObject([{ name: 'send_email' }]);
    expect(JSON.parse(evs[4].data.toolCalls[0].arguments)).toEqual({ to: 'ada@example.com' });
    expect(evs[5].data).toMatchObject({ status: 'ok', content: 'sent to ada@example.com', name: 'send_email' });
    expect(evs[8].data).toMatchObject({ text: 'Done: sent to ada@example.com', usage: { inputTokens: 5, outputTokens: 2 } });
    expect(evs.at(-1).data).toMatchObject({ turn: 1, reason: 'completed' });
    expect(runner.effects()).toEqual(['start ada@example.com', 'sent ada@example.com']);
  }, 120_000);

  it('has the call in the log while the tool runs: a fork taken then holds it and closes it', async () => {
    const id = await create('py');
    await send(id, 'slow-fork@example.com');
    await waitFor(() => runner.effects().includes('start slow-fork@example.com'), { what: 'the tool to start', timeoutMs: 45_000 });
    const during = await events(id);
    const call = during.find((e: any) => e.type === 'model/message' && e.data.toolCalls.length);
    expect(call, JSON.stringify(during)).toBeDefined();
    expect(during.some((e: any) => e.type === 'tool/result')).toBe(false); // the tool is still running
    expect(runner.effects()).not.toContain('sent slow-fork@example.com');
    const fork = (await gql(`mutation($id: ID!, $at: Int!) { forkSession(input: {sessionId: $id, atSeq: $at}) { session { id } } }`, { id, at: call.seq }))
      .forkSession.session;
    const child = await events(fork.id);
    const closed = child.find((e: any) => e.type === 'tool/result' && e.synthetic);
    expect(closed?.data).toMatchObject({ callId: call.data.toolCalls[0].id, name: 'send_email' });
    expect(closed.data.content).toContain('send_email');
    expect(closed.data.content).toContain('has side effects'); // the effect the runner declared (declareRunnerTools)
    expect(during.find((e: any) => e.type === 'session/runner-tools')?.data.tools).toMatchObject([{ name: 'send_email', effect: 'side-effects' }]);
    // The parent's turn completes with the tool's one run.
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the parent turn', timeoutMs: 45_000 });
    expect(runner.effects().filter((l) => l === 'sent slow-fork@example.com')).toHaveLength(1);
  }, 120_000);
});

describe('automatic compaction with the Python SDK', () => {
  it("compacts with the runner's own model before a request over the budget", async () => {
    const runner = startPython('py-compact', { POOL: 'py-compact' });
    const id = (
      await gql(`mutation { createSession(input: {runner: "py-compact", model: {provider: "scripted", model: "scripted", contextTokens: 2000}}) { id } }`)
    ).createSession.id;
    await send(id, 'short@example.com');
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the first turn', timeoutMs: 45_000 });
    await send(id, `long@example.com ${'lorem ipsum '.repeat(800)}`);
    await waitFor(async () => turnEnds(await events(id)).length === 2, { what: 'the second turn', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
    });
    const evs = await events(id);
    const firstEnd = turnEnds(evs)[0].seq;
    const secondStart = evs.filter((e: any) => e.type === 'turn/start')[1].seq;
    const between = evs.filter((e: any) => e.seq > firstEnd && e.seq < secondStart && e.type !== 'inbox/add' && e.type !== 'inbox/remove');
    expect(between.map((e: any) => e.type)).toEqual(['plugin/compaction/start', 'surface/replace', 'plugin/compaction/end']);
    expect(between[1].data).toMatchObject({ fromSeq: 0, toSeq: firstEnd, content: "Summary of 4 messages by the runner's model." });
    expect(between[2].data).toMatchObject({ reason: 'automatic', summarySeq: between[1].seq });
    // What a model is sent now starts from the summary.
    const { messages } = (await gql(`query($id: ID!) { session(id: $id) { modelRequest { messages } } }`, { id })).session.modelRequest;
    expect(messages[0]).toEqual({ role: 'system', content: expect.stringContaining("Summary of 4 messages by the runner's model.") });
    expect(messages.some((m: any) => m.content === 'Done: sent to short@example.com')).toBe(false);
  }, 120_000);
});

describe('a Python runner serving a pool, with a tool that needs approval', () => {
  it('asks and lets the session go; once the call is approved the pool offers it again and the runner runs the call once', async () => {
    const runner = startPython('py-gated', { POOL: 'py-gated', GATED: '1' });
    const id = await create('py-gated');
    await send(id, 'gated@example.com');
    const status = async () => (await gql(`query($id: ID!) { session(id: $id) { status runnerHolder } }`, { id })).session;
    await waitFor(async () => (await status()).status === 'WAITING', { what: 'the approval request', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
    });
    expect(await status()).toEqual({ status: 'WAITING', runnerHolder: null });
    const asked = (await events(id)).find((e: any) => e.type === 'tool/approval-request');
    expect(runner.effects()).toEqual([]);
    await gql(`mutation($id: ID!, $c: ID!) { approveToolCall(input: {sessionId: $id, callId: $c}) { status } }`, { id, c: asked.data.callId });
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the turn', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
    });
    const evs = await events(id);
    expect(evs.filter((e: any) => e.type === 'tool/result').map((e: any) => e.data.content)).toEqual(['sent to gated@example.com']);
    expect(turnEnds(evs)[0].data).toMatchObject({ reason: 'completed' });
    expect(runner.effects()).toEqual(['start gated@example.com', 'sent gated@example.com']);
    runner.child.kill('SIGKILL');
  }, 120_000);
});

describe('fencing in the Python SDK', () => {
  it("tells a zombie its lease is lost when the events stored since are the repair's closers, not its batch", async () => {
    const id = await create('py-zombie');
    await send(id, 'x@example.com');
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_zombie.py')], {
        env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'), FORKLINE_URL: service.url, SESSION_ID: id },
      });
      let text = '';
      child.stdout.on('data', (c) => (text += c));
      child.stderr.on('data', (c) => (text += c));
      child.on('error', reject);
      child.on('close', () => resolve(text));
    });
    expect(JSON.parse(out.trim().split('\n').at(-1)!), out).toEqual({ zombie: 'LeaseLostError' });
    const evs = await events(id);
    // The log holds the repair's closers (same count and types as the zombie's batch), not the zombie's events.
    expect(evs.slice(-3).map((e: any) => [e.type, e.synthetic])).toEqual([
      ['tool/result', true],
      ['step/end', true],
      ['turn/end', true],
    ]);
    expect(turnEnds(evs)).toHaveLength(1);
  }, 60_000);
});

describe('a Python runner SIGKILLed while its tool runs', () => {
  it('leaves a turn repaired once (interrupted); the next runner does not run the tool again', async () => {
    const doomed = startPython('py-doomed', { POOL: 'py-kill', LEASE_MS: '3000', TOOL_SECONDS: '30' });
    const id = await create('py-kill');
    await send(id, 'slow-kill@example.com');
    await waitFor(() => doomed.effects().includes('start slow-kill@example.com'), { what: 'the tool to start', timeoutMs: 45_000 });
    doomed.child.kill('SIGKILL');
    await new Promise((r) => doomed.child.once('exit', r));
    const heir = startPython('py-heir', { POOL: 'py-kill' });
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the repair', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nheir: ${heir.output()}`);
    });
    await send(id, 'after@example.com');
    await waitFor(async () => turnEnds(await events(id)).length === 2, { what: 'the next turn', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nheir: ${heir.output()}`);
    });
    const evs = await events(id);
    const ends = turnEnds(evs);
    expect(ends[0]).toMatchObject({ synthetic: true, data: { turn: 1, reason: 'interrupted' } });
    expect(ends[1]).toMatchObject({ synthetic: false, data: { turn: 2, reason: 'completed' } });
    const call = evs.find((e: any) => e.type === 'model/message' && e.data.turn === 1);
    const closers = evs.filter((e: any) => e.synthetic);
    expect(closers.map((e: any) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end']); // exactly once
    expect(closers[0].data).toMatchObject({ callId: call.data.toolCalls[0].id, name: 'send_email' });
    expect(closers[0].data.content).toContain('has side effects');
    expect(doomed.effects()).toEqual(['start slow-kill@example.com']);
    expect(heir.effects()).toEqual(['start after@example.com', 'sent after@example.com']); // the killed call is not run again
  }, 180_000);
});

describe("a user's cancelTurn on a turn a Python runner runs", () => {
  it('ends the turn cancelled at once; the late result is refused; the next turn runs', async () => {
    const runner = startPython('py-cancel', { POOL: 'py-cancel', LEASE_MS: '60000', TOOL_SECONDS: '6' });
    const id = await create('py-cancel');
    await send(id, 'slow-cancel@example.com');
    await waitFor(() => runner.effects().includes('start slow-cancel@example.com'), { what: 'the tool to start', timeoutMs: 45_000 });
    await gql(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id });
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the cancelled turn', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
    });
    // The tool cannot be stopped mid-run (a Python function): it ends, and its result is refused.
    await waitFor(() => runner.effects().includes('sent slow-cancel@example.com'), { what: 'the tool to end', timeoutMs: 45_000 });
    await send(id, 'after-cancel@example.com');
    await waitFor(async () => turnEnds(await events(id)).length === 2, { what: 'the next turn', timeoutMs: 45_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
    });
    const evs = await events(id);
    const ends = turnEnds(evs);
    expect(ends.map((e: any) => e.data.reason)).toEqual(['cancelled', 'completed']);
    const call = evs.find((e: any) => e.type === 'model/message' && e.data.toolCalls?.length && e.seq < ends[0].seq);
    expect(evs.filter((e: any) => e.type === 'tool/result' && e.data.callId === call.data.toolCalls[0].id)).toEqual([]); // the late result was refused
    expect(evs.find((e: any) => e.type === 'step/end' && e.seq < ends[0].seq)?.data).toMatchObject({ reason: 'interrupted' });
    expect(runner.effects()).toEqual([
      'start slow-cancel@example.com',
      'sent slow-cancel@example.com',
      'start after-cancel@example.com',
      'sent after-cancel@example.com',
    ]);
    expect(runner.child.exitCode).toBeNull(); // the runner went on serving its pool
  }, 180_000);
});

describe('a Python runner whose sessions fail', () => {
  it('backs off before claiming again instead of re-claiming the failing session in a tight loop', async () => {
    const runner = startPython('py-failing', { POOL: 'py-fail', FAIL_SESSIONS: '1' });
    const claims = () =>
      runner
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{"claimed"')).length;
    const id = await create('py-fail');
    await send(id, 'nobody@example.com');
    await waitFor(() => claims() >= 1, { what: 'the first claim', timeoutMs: 45_000 });
    // Each failure releases the session, which is offered again at once. Claimed again at once,
    // a few seconds hold dozens of claims; backing off (0.25-0.5 s, doubling), at most five.
    const first = claims();
    await new Promise((r) => setTimeout(r, 4000));
    const inWindow = claims() - first;
    expect(inWindow, runner.output()).toBeLessThanOrEqual(5);
    expect(inWindow, runner.output()).toBeGreaterThanOrEqual(1); // it does try again
    expect(runner.output()).toContain('fails every session');
    runner.child.kill('SIGKILL');
  }, 120_000);
});

describe("a Python tool's output", () => {
  it('is stored as a result saying the tool ran, whatever it is: not JSON, too big, NUL or a lone surrogate', () => {
    // tool_result as run_turns calls it, on tools returning what a careless tool returns.
    const script = `
import json
from forkline_runner.turns import Tool, tool_result
outputs = {"dict": {"a": 1}, "bytes": b"PK", "nul": "a\\x00b\\ud800c", "big": "x" * 2_000_000, "nan": float("nan")}
for name, output in outputs.items():
    tool = Tool(name, "", {}, "read-only", lambda _args, output=output: output)
    event = tool_result("ses_1", 1, 1, {"id": "c_" + name, "name": name, "arguments": "{}"}, tool)
    print(json.dumps([name, event["data"]["status"], event["data"]["content"]]))
`;
    const run = spawnSync('python3', ['-c', script], { env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python') }, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    const rows = Object.fromEntries(
      run.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as [string, string, string])
        .map(([name, status, content]) => [name, [status, content]]),
    );
    expect(rows).toEqual({
      dict: ['ok', '{"a": 1}'],
      bytes: ['error', 'the tool ran, but its output could not be recorded: it is not JSON (Object of type bytes is not JSON serializable)'],
      nul: ['ok', 'a\uFFFDb\uFFFDc'],
      big: ['error', "the tool ran, but its output (2000000 bytes) is over this runner's limit of 1000000 bytes (max_result_bytes), so it was not recorded"],
      nan: ['error', 'the tool ran, but its output could not be recorded: it is not JSON (Out of range float values are not JSON compliant)'],
    });
  });
});
