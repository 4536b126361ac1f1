// Tool approval and refused batches with the Python runner SDK
// (packages/python/forkline_runner): each serve is a `python3` process of its
// own (tests/fixtures/runners/python_approvals.py: claim, run_turns, release),
// as after a restart, against a real forkline server whose body limit is small.
//
// - a call that needs a decision is in the log, then its approval request; the
//   tool has not run, the session is WAITING and no runner holds it; a call of
//   the same step that needs none has run;
// - approveToolCall / denyToolCall decide; the next process runs an approved
//   call once, after the decision and plugin/agent/approved-call-start are in
//   the log, answers a denied one as not run (the contract's wording), and the
//   turn goes on to the model's answer; calls are asked one at a time, in
//   call order, as forkline's agent asks;
// - a runner that dies while an approved call runs leaves it to the repair;
// - a batch the server refuses (a broken rule; a body over its limit: 413)
//   ends the turn failed, saying why, and the process ends (no loop).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Kind, parse, print, type FragmentDefinitionNode } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startService, type ServiceProcess } from '../helpers/process.ts';
import { serviceReads } from '../helpers/python-process.ts';
import { waitFor } from '../helpers/wait.ts';

let service: ServiceProcess;
const started: ChildProcess[] = [];
/** The server's body limit here: a batch over it is refused with 413. */
const MAX_BODY_BYTES = 2 * 1024 * 1024;

beforeAll(async () => {
  service = await startService({ env: { FORKLINE_MAX_BODY_BYTES: String(MAX_BODY_BYTES) } });
});
afterAll(async () => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await service?.stop();
});

const { gql, events } = serviceReads(() => service.url);
const SESSION = `query($id: ID!) { session(id: $id) { status runnerHolder pendingApprovals { callId name } } }`;
const status = async (id: string) => (await gql(SESSION, { id })).session;
const decide = (id: string, callId: string, verb: 'approveToolCall' | 'denyToolCall', reason = '') =>
  gql(`mutation($id: ID!, $c: ID!, $r: String) { ${verb}(input: {sessionId: $id, callId: $c, reason: $r}) { status } }`, { id, c: callId, r: reason });

let sessionNo = 0;
async function sessionAsking(ask: Record<string, unknown>, approvalRequired?: string[]) {
  const pool = `py-approvals-${++sessionNo}`;
  const id = (
    await gql(`mutation($p: String!, $a: [String!]) { createSession(input: {runner: $p, approvalRequired: $a}) { id } }`, { p: pool, a: approvalRequired })
  ).createSession.id as string;
  await gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: JSON.stringify(ask) });
  return { id, pool };
}

interface Served {
  code: number | null;
  lines: any[];
  output: string;
}

/** Starts one Python process serving the session; `done` resolves when it exits. */
function startServing(id: string, pool: string, env: Record<string, string> = {}) {
  const child = spawn('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_approvals.py')], {
    env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'), FORKLINE_URL: service.url, SESSION_ID: id, POOL: pool, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const lines = () =>
    output
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
  const done = new Promise<Served>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, lines: lines(), output }));
  });
  return { child, lines, output: () => output, done };
}

/** Serves the session once; the process must end on its own, without an error. */
async function serve(id: string, pool: string, env: Record<string, string> = {}): Promise<Served> {
  const served = await startServing(id, pool, env).done;
  expect(served.code, served.output).toBe(0);
  return served;
}
const ran = (s: Served) => s.lines.filter((l) => l.ran).map((l) => l.ran);
const modelRead = (s: Served) => s.lines.filter((l) => l.model_read).map((l) => l.model_read);
const results = (log: any[]) => log.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content]);

describe('tool approval with the Python runner SDK', () => {
  it('asks in the log and waits; the process that claims the session after the approval runs the call once, then the turn goes on', async () => {
    const { id, pool } = await sessionAsking({ calls: ['lookup', 'wire_money'] });
    const first = await serve(id, pool);
    expect(ran(first)).toEqual(['lookup']); // the other call of the step runs; the gated one does not
    let log = await events(id);
    const message = log.find((e: any) => e.type === 'model/message');
    expect(message.data.toolCalls.map((c: any) => [c.name, c.effect])).toEqual([
      ['lookup', 'read-only'],
      ['wire_money', 'side-effects'],
    ]);
    const request = log.find((e: any) => e.type === 'tool/approval-request');
    expect(request).toMatchObject({ synthetic: false, data: { turn: 1, step: 1, callId: 'call_1_wire_money' } });
    expect(request.seq).toBeGreaterThan(message.seq);
    expect(results(log)).toEqual([['lookup', 'ok', 'found']]);
    expect(log.some((e: any) => e.type === 'turn/end')).toBe(false);
    expect(await status(id)).toEqual({ status: 'WAITING', runnerHolder: null, pendingApprovals: [{ callId: 'call_1_wire_money', name: 'wire_money' }] });

    // While it waits, a process that claims the session runs nothing and writes nothing.
    const count = log.length;
    const idle = await serve(id, pool);
    expect(ran(idle)).toEqual([]);
    expect(idle.lines.at(-1)).toEqual({ served: 0 });
    expect(await events(id)).toHaveLength(count);

    await decide(id, 'call_1_wire_money', 'approveToolCall', 'fine');
    const second = await serve(id, pool);
    // It ran once, with its decision and the approved call's start in the log before it.
    expect(second.lines.filter((l) => l.ran)).toEqual([{ ran: 'wire_money', last_event: 'plugin/agent/approved-call-start' }]);
    log = await events(id);
    const approval = log.findIndex((e: any) => e.type === 'tool/approval');
    const start = log.findIndex((e: any) => e.type === 'plugin/agent/approved-call-start');
    expect(log[approval].data).toMatchObject({ callId: 'call_1_wire_money', decision: 'approved', reason: 'fine' });
    expect(log[start].data).toEqual({ turn: 1, step: 1, callId: 'call_1_wire_money' });
    expect(start).toBeGreaterThan(approval);
    expect(results(log)).toEqual([
      ['lookup', 'ok', 'found'],
      ['wire_money', 'ok', 'wired'],
    ]);
    // The model read both results and answered; the turn completed.
    expect(modelRead(second)).toEqual([['found', 'wired']]);
    expect(log.filter((e: any) => e.type === 'model/message').map((e: any) => e.data.text)).toEqual(['', 'done']);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', synthetic: false, data: { turn: 1, reason: 'completed' } });
    expect((await status(id)).status).toBe('IDLE');
  }, 120_000);

  it('answers a denied call as not run, with the reason, and the model reads it', async () => {
    const { id, pool } = await sessionAsking({ calls: ['wire_money'] });
    // Claims that start the turn (startTurn): the decided step is taken up all the same.
    expect(ran(await serve(id, pool, { START_TURNS: '1' }))).toEqual([]);
    expect((await status(id)).status).toBe('WAITING');
    await decide(id, 'call_0_wire_money', 'denyToolCall', 'too much');
    const after = await serve(id, pool, { START_TURNS: '1' });
    expect(ran(after)).toEqual([]);
    const log = await events(id);
    const denied = 'Tool call "wire_money" (call_0_wire_money) was denied: too much. It did not run.';
    expect(results(log)).toEqual([['wire_money', 'error', denied]]);
    expect(log.some((e: any) => e.type === 'plugin/agent/approved-call-start')).toBe(false);
    expect(modelRead(after)).toEqual([[`Error: ${denied}`]]); // an error result, as forkline renders one for its own agent
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 120_000);

  it("asks for a call of a tool the session's approvalRequired names, though the runner's tool asks for none", async () => {
    const { id, pool } = await sessionAsking({ calls: ['wire_money'] }, ['wire_money']);
    expect(ran(await serve(id, pool, { NO_GATES: '1' }))).toEqual([]);
    expect(await status(id)).toMatchObject({ status: 'WAITING', pendingApprovals: [{ callId: 'call_0_wire_money' }] });
    await decide(id, 'call_0_wire_money', 'approveToolCall');
    expect(ran(await serve(id, pool, { NO_GATES: '1' }))).toEqual(['wire_money']);
    expect((await events(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 120_000);

  it('asks for each gated call when it is reached, in call order (a function of the arguments gates too); a decided call is settled before the next is asked', async () => {
    const { id, pool } = await sessionAsking({ calls: ['wire_money', 'send_email'] });
    await serve(id, pool);
    expect((await status(id)).pendingApprovals).toEqual([{ callId: 'call_0_wire_money', name: 'wire_money' }]);
    await decide(id, 'call_0_wire_money', 'approveToolCall');
    const second = await serve(id, pool);
    expect(ran(second)).toEqual(['wire_money']);
    // The next call is asked only now: its tool's needs_approval (a function of its arguments) said so.
    expect(await status(id)).toMatchObject({ status: 'WAITING', pendingApprovals: [{ callId: 'call_1_send_email', name: 'send_email' }] });
    await decide(id, 'call_1_send_email', 'denyToolCall');
    const third = await serve(id, pool);
    expect(ran(third)).toEqual([]);
    const log = await events(id);
    expect(results(log)).toEqual([
      ['wire_money', 'ok', 'wired'],
      ['send_email', 'error', 'Tool call "send_email" (call_1_send_email) was denied. It did not run.'],
    ]);
    expect(log.filter((e: any) => e.type === 'tool/approval-request').map((e: any) => e.data.callId)).toEqual(['call_0_wire_money', 'call_1_send_email']);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 120_000);

  it('leaves an approved call whose runner died while it ran to the repair: it is never run again', async () => {
    const { id, pool } = await sessionAsking({ calls: ['wire_money'] });
    await serve(id, pool, { HANG_TOOL: 'wire_money' });
    await decide(id, 'call_0_wire_money', 'approveToolCall');
    const dying = startServing(id, pool, { HANG_TOOL: 'wire_money' });
    await waitFor(() => dying.lines().some((l) => l.ran), { what: 'the approved call to run', timeoutMs: 45_000 });
    const { token } = dying.lines().find((l) => l.claimed);
    dying.child.kill('SIGKILL');
    await dying.done;
    // Its lease given up (as when it expires), the next claim repairs the turn: the call was in flight.
    await gql(`mutation($i: LeaseInput!) { releaseSession(input: $i) { id } }`, { i: { sessionId: id, leaseToken: token } });
    const heir = await serve(id, pool);
    expect(ran(heir)).toEqual([]);
    const log = await events(id);
    const start = log.findIndex((e: any) => e.type === 'plugin/agent/approved-call-start');
    expect(start).toBeGreaterThan(log.findIndex((e: any) => e.type === 'tool/approval'));
    expect(log.slice(start + 1).map((e: any) => [e.type, e.data.status ?? e.data.reason, e.synthetic])).toEqual([
      ['tool/result', 'interrupted', true],
      ['step/end', 'interrupted', true],
      ['turn/end', 'interrupted', true],
    ]);
  }, 120_000);
});

describe('a batch the server refuses, with the Python runner SDK', () => {
  it('ends the turn failed from the log when a result is over the server body limit (413): the tool ran once, and the process ends', async () => {
    const { id, pool } = await sessionAsking({ calls: ['big'] });
    // The runner's own limit set above the server's: the result's batch is refused.
    const served = await serve(id, pool, { BIG_BYTES: String(MAX_BODY_BYTES + 1024), MAX_RESULT_BYTES: String(4 * MAX_BODY_BYTES) });
    expect(ran(served)).toEqual(['big']);
    const log = await events(id);
    const tail = log.slice(log.findIndex((e: any) => e.type === 'model/message') + 1);
    expect(tail.map((e: any) => [e.type, e.data.status ?? e.data.reason ?? null, e.synthetic])).toEqual([
      ['tool/result', 'error', false],
      ['step/end', 'failed', false],
      ['plugin/agent/error', null, false],
      ['turn/end', 'failed', false],
    ]);
    expect(tail[0].data.content).toMatch(/^the runner could not record this call's result \(the server refused its batch: .*413.*\); the tool may have run$/);
    expect(tail[2].data.message).toMatch(/^the server refused the runner's batch: Request body too large \(REQUEST_ENTITY_TOO_LARGE, HTTP 413/);
    expect(served.output).toContain('the server refused a batch');
    expect((await status(id)).status).toBe('IDLE');
  }, 120_000);

  it("bounds a tool's output under its own limit: an error result saying the tool ran, and the turn goes on", async () => {
    const { id, pool } = await sessionAsking({ calls: ['big'] });
    const served = await serve(id, pool, { BIG_BYTES: String(MAX_BODY_BYTES + 1024) }); // the default max_result_bytes (1,000,000)
    expect(ran(served)).toEqual(['big']);
    const log = await events(id);
    const content = `the tool ran, but its output (${MAX_BODY_BYTES + 1024} bytes) is over this runner's limit of 1000000 bytes (max_result_bytes), so it was not recorded`;
    expect(results(log)).toEqual([['big', 'error', content]]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 120_000);

  // (A call id twice in a step no longer breaks one: the second is recorded under call_<position>, python-wire-names.test.ts.)
  it('ends the turn failed when a batch breaks a rule (more calls than a step holds): no tool runs, nothing is left open', async () => {
    const { id, pool } = await sessionAsking({ calls: Array.from({ length: 4097 }, () => 'lookup') });
    const served = await serve(id, pool);
    expect(ran(served)).toEqual([]);
    const log = await events(id);
    expect(log.some((e: any) => e.type === 'model/message')).toBe(false);
    const tail = log.slice(log.findIndex((e: any) => e.type === 'step/start') + 1);
    expect(tail.map((e: any) => [e.type, e.data.reason ?? null])).toEqual([
      ['step/end', 'failed'],
      ['plugin/agent/error', null],
      ['turn/end', 'failed'],
    ]);
    expect(tail[1].data.message).toMatch(/^the server refused the runner's batch: .*\(BAD_USER_INPUT, rule step calls\)$/);
    expect((await status(id)).status).toBe('IDLE');
  }, 120_000);

  it('ends the turn failed when the model answers what is no reply (a call without an id), before anything of it is written', async () => {
    const { id, pool } = await sessionAsking({ bad_reply: true });
    await serve(id, pool);
    const log = await events(id);
    expect(log.some((e: any) => e.type === 'model/message')).toBe(false);
    const error = log.find((e: any) => e.type === 'plugin/agent/error');
    expect(error.data.message).toMatch(/^model failed: the model's tool call .* lacks a text id, name or arguments$/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  }, 120_000);
});

describe('a summary the server refuses, with the Python runner SDK', () => {
  it('is recorded as a failed compaction (413), and the turn runs', async () => {
    const pool = 'py-summary';
    const id = (
      await gql(`mutation($p: String!) { createSession(input: {runner: $p, model: {provider: "scripted", model: "scripted", contextTokens: 2000}}) { id } }`, {
        p: pool,
      })
    ).createSession.id as string;
    const say = (text: string) => gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text });
    await say(JSON.stringify({ calls: [] }));
    await serve(id, pool);
    await say(JSON.stringify({ calls: [], pad: 'lorem ipsum '.repeat(800) }));
    const served = await serve(id, pool, { SUMMARY_BYTES: String(MAX_BODY_BYTES + 1024) });
    const log = await events(id);
    const ends = log.filter((e: any) => e.type === 'plugin/compaction/end');
    expect(ends).toHaveLength(1);
    expect(ends[0].data.error).toMatch(/^the server refused the summary: Request body too large \(REQUEST_ENTITY_TOO_LARGE, HTTP 413/);
    expect(log.some((e: any) => e.type === 'surface/replace')).toBe(false);
    expect(log.filter((e: any) => e.type === 'turn/end').map((e: any) => e.data.reason)).toEqual(['completed', 'completed']);
    expect(served.output).toContain('the server refused the summary');
  }, 120_000);
});

describe("the Python SDK's model request", () => {
  it('asks for the fields the TypeScript SDK asks for (client/operations/runners.graphql RunnerModelRequest)', () => {
    const run = spawnSync('python3', ['-c', 'from forkline_runner.runner import REQUEST_FIELDS; print(REQUEST_FIELDS)'], {
      env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python') },
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    const fragment = parse(fs.readFileSync(path.join(PROJECT_ROOT, 'client/operations/runners.graphql'), 'utf8')).definitions.find(
      (d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION && d.name.value === 'RunnerModelRequest',
    )!;
    const python = parse(`fragment RunnerModelRequest on ModelRequest { ${run.stdout.trim()} }`).definitions[0] as FragmentDefinitionNode;
    expect(print(python.selectionSet)).toBe(print(fragment.selectionSet));
  });
});

describe('which calls wait for a decision, in the Python SDK', () => {
  it("honours the session's set (names, <server>__*, *) and the tool's own gate; a gate that raises asks", () => {
    const script = `
import json
from forkline_runner.turns import Tool, call_needs_approval
def gate(args):
    if args.get("boom"):
        raise ValueError("boom")
    return args.get("n") == 1
tool = Tool("mail__send", "", {}, "side-effects", lambda a: "", needs_approval=gate)
rows = []
for entries, args in [([], {"n": 2}), (["mail__send"], {"n": 2}), (["mail__*"], {"n": 2}), (["maily__*"], {"n": 2}), (["*"], {"n": 2}), ([], {"n": 1}), ([], {"boom": True})]:
    rows.append(call_needs_approval({"approvalRequired": entries}, tool, {"id": "c", "name": "mail__send", "arguments": json.dumps(args)}))
print(json.dumps(rows))
`;
    const run = spawnSync('python3', ['-c', script], { env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python') }, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual([false, true, true, false, true, true, true]);
  });
});
