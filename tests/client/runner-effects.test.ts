// The promise external runners keep (docs/runners.md "Why the call goes
// first"), through a real server and separate runner processes, with each
// adapter the project ships: a call of the runner's own tool is in the log,
// with the effect the runner declared, before the tool runs. A fork taken
// while it runs closes the call with a synthetic result naming that effect;
// a runner SIGKILLed while it runs leaves a turn repaired exactly once, and
// the next runner does not run the tool again (side effects are counted in a
// file the tool appends to; the tool waits for a file the test creates).
// Also: a fan-out whose variants name two models reaches two models; the
// Agents adapter streams text and records usage.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { killRunners, startRunnerProcess, stopRunner } from '../helpers/runner-process.ts';
import { openSubscriptions, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

let service: ServiceProcess;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-runner-effects-'));

async function gql(query: string, variables?: Record<string, unknown>) {
  const { body } = await postGraphQL(service.url, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}
const EVENTS = `query($id: ID!) { session(id: $id) { eventCount status events(first: 500) { edges { node { seq type data synthetic } } } } }`;
const events = async (id: string) => (await gql(EVENTS, { id })).session.events.edges.map((e: any) => e.node);
const statusOf = async (id: string) => (await gql(`query($id: ID!) { session(id: $id) { status } }`, { id })).session.status;
const send = (id: string, text: string) =>
  gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text });
const create = async (pool: string) =>
  (await gql(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []);
const turnEnds = (evs: any[]) => evs.filter((e) => e.type === 'turn/end');

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  killRunners();
  await service?.stop();
});

const ADAPTERS = [
  { name: 'AI SDK', script: 'ai-sdk-runner.ts', pool: 'fx-ai' },
  { name: 'OpenAI Agents', script: 'agents-runner.ts', pool: 'fx-agents' },
] as const;

describe.each(ADAPTERS)('the $name adapter: a tool with side effects that takes a while', ({ name, script, pool }) => {
  const tag = name.replace(/\W/g, '');

  it('has its call in the log while it runs; a fork then closes it naming the declared effect', async () => {
    const effects = path.join(dir, `${tag}-fork.effects`);
    const release = path.join(dir, `${tag}-fork.release`);
    const runner = startRunnerProcess(service.url, { name: `${tag}-fork`, dir, script, env: { POOL: pool, EFFECTS_FILE: effects, RELEASE_FILE: release } });
    const id = await create(pool);
    await send(id, 'email bob');
    // The tool is running (its side effect happened; it waits for the release file).
    await waitFor(async () => lines(effects).length === 1, { what: 'the tool to start', timeoutMs: 30_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
    });
    const during = await events(id);
    const message = during.find((e: any) => e.type === 'model/message');
    expect(message.data.toolCalls).toMatchObject([{ name: 'send_email', effect: 'side-effects' }]);
    expect(during.some((e: any) => e.type === 'tool/result')).toBe(false);
    expect(await statusOf(id)).toBe('RUNNING'); // the turn is open under the runner's lease

    const fork = (
      await gql(`mutation($id: ID!, $at: Int!) { forkSession(input: {sessionId: $id, atSeq: $at}) { session { id } } }`, { id, at: during.at(-1).seq })
    ).forkSession.session;
    const child = await events(fork.id);
    const closer = child.find((e: any) => e.type === 'tool/result' && e.synthetic);
    expect(closer.data).toMatchObject({ callId: message.data.toolCalls[0].id, status: 'not-started', name: 'send_email' });
    expect(closer.data.content).toContain('"send_email" has side effects');

    fs.writeFileSync(release, '');
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the turn to end', timeoutMs: 30_000 });
    const after = await events(id);
    expect(after.find((e: any) => e.type === 'tool/result')).toMatchObject({ synthetic: false, data: { status: 'ok', content: 'sent to email bob' } });
    expect(turnEnds(after)[0].data.reason).toBe('completed');
    expect(lines(effects)).toHaveLength(1);
    await stopRunner(runner);
  });

  it('a runner SIGKILLed while it runs: the turn is repaired once, and the next runner does not run it again', async () => {
    const effects = path.join(dir, `${tag}-kill.effects`);
    const env = { POOL: `${pool}-kill`, EFFECTS_FILE: effects, RELEASE_FILE: path.join(dir, `${tag}-kill.release`) };
    const doomed = startRunnerProcess(service.url, { name: `${tag}-doomed`, dir, script, env: { ...env, LEASE_MS: '3000' } });
    const id = await create(env.POOL);
    await send(id, 'email carol');
    await waitFor(async () => lines(effects).length === 1, { what: 'the tool to start', timeoutMs: 30_000 });
    doomed.child.kill('SIGKILL');
    await new Promise((r) => doomed.child.once('exit', r));
    fs.writeFileSync(env.RELEASE_FILE, ''); // a tool run again would finish now
    const heir = startRunnerProcess(service.url, { name: `${tag}-heir`, dir, script, env });
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the repair', timeoutMs: 30_000 });
    // The heir answers the next input (so it did look at the session), without sending the email again.
    await send(id, 'and look up the weather');
    await waitFor(async () => turnEnds(await events(id)).length === 2, { what: 'the heir to answer', timeoutMs: 30_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nheir: ${heir.output()}`);
    });
    const evs = await events(id);
    const [first, second] = turnEnds(evs);
    expect(first).toMatchObject({ synthetic: true, data: { turn: 1, reason: 'interrupted' } });
    expect(second).toMatchObject({ synthetic: false, data: { turn: 2, reason: 'completed' } });
    const closers = evs.filter((e: any) => e.synthetic);
    expect(closers.map((e: any) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end']); // exactly once
    expect(closers[0].data.status).toBe('interrupted');
    expect(closers[0].data.content).toContain('"send_email" has side effects');
    expect(lines(effects)).toHaveLength(1);
    await stopRunner(heir);
  });
});

describe('the request is the source of truth', () => {
  it('a fan-out whose variants name two models reaches two models through the AI SDK adapter; one the runner cannot serve fails clearly', async () => {
    const runner = startRunnerProcess(service.url, { name: 'models', dir, env: { POOL: 'fx-models' } });
    const id = await create('fx-models');
    await send(id, 'hello');
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the first turn', timeoutMs: 30_000 });
    const variants = [
      { message: 'who are you?', model: { provider: 'openai', model: 'alpha' } },
      { message: 'who are you?', model: { provider: 'openai', model: 'beta' } },
      { message: 'who are you?', model: { provider: 'openai', model: 'gamma' } },
    ];
    const out = (
      await gql(`mutation($id: ID!, $v: [FanOutVariantInput!]!) { fanOut(input: {sessionId: $id, variants: $v}) { children { id } } }`, { id, v: variants })
    ).fanOut;
    const answers = await Promise.all(
      out.children.map(async (c: { id: string }) => {
        await waitFor(async () => turnEnds(await events(c.id)).some((e: any) => !e.synthetic && e.data.turn === 2), { what: 'the variant', timeoutMs: 30_000 });
        const evs = await events(c.id);
        return {
          text: evs.filter((e: any) => e.type === 'model/message').at(-1)?.data.text,
          end: turnEnds(evs).at(-1).data.reason,
          error: evs.find((e: any) => e.type === 'plugin/agent/error')?.data.message,
        };
      }),
    );
    expect(answers[0]).toMatchObject({ text: 'I am alpha', end: 'completed' });
    expect(answers[1]).toMatchObject({ text: 'I am beta', end: 'completed' });
    expect(answers[2]).toMatchObject({ end: 'failed' });
    expect(answers[2].error).toContain('cannot serve model "gamma" of provider "openai"');
    await stopRunner(runner);
  });
});

describe('the OpenAI Agents adapter', () => {
  it('streams text deltas and records usage', async () => {
    const runner = startRunnerProcess(service.url, { name: 'agents-stream', dir, script: 'agents-runner.ts', env: { POOL: 'fx-agents-stream' } });
    const id = await create('fx-agents-stream');
    const open = await openSubscriptions(service.url);
    const turns = subscribeWs(service.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind turn text } }`, { id });
    await subscriptionsOpened(service.url, open, 1); // the subscription is set up (TEXT_DELTA is not replayed)
    await send(id, 'capital of Norway');
    await turns.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'TURN_ENDED', 30_000);
    const deltas = turns.items.filter((u) => u.sessionTurns.kind === 'TEXT_DELTA').map((u) => u.sessionTurns.text);
    expect(deltas.join('')).toBe('Found: result for capital of Norway');
    const messages = (await events(id)).filter((e: any) => e.type === 'model/message');
    expect(messages.map((m: any) => m.data.usage)).toEqual([
      { inputTokens: 7, outputTokens: 3 },
      { inputTokens: 7, outputTokens: 3 },
    ]);
    await turns.close();
    await stopRunner(runner);
  });
});
