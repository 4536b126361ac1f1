// External runners as separate processes: the AI SDK adapter
// (@forkline/ai-sdk on @forkline/runner, with the SDK's
// MockLanguageModelV3) serves pool `ext` of a real forkline server. Messages
// sent through GraphQL get turns with a tool call written by the runner,
// seen on subscriptions; a fork mid-call is continued by the runner with the
// request forkline builds; a runner SIGKILLed mid-turn is repaired once after
// its lease expires and another runner answers. The OpenAI Agents SDK adapter
// (@forkline/openai-agents, a custom model with no network) serves
// pool `agents` the same way.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { killRunners, startRunnerProcess, stopRunner } from '../helpers/runner-process.ts';
import { openSubscriptions, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { buildModelMessages } from '../../src/core/model-request.ts';
import { toModelMessages } from '@forkline/ai-sdk';

let service: ServiceProcess;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-runners-'));

const startRunner = (name: string, env: Record<string, string> = {}, script?: 'ai-sdk-runner.ts' | 'agents-runner.ts') =>
  startRunnerProcess(service.url, { name, dir, env, script });

async function gql(query: string, variables?: Record<string, unknown>) {
  const { body } = await postGraphQL(service.url, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

const EVENTS = `query($id: ID!) { session(id: $id) { eventCount status runner events(first: 500) { edges { node { seq type data synthetic } } } } }`;
const events = async (id: string) => (await gql(EVENTS, { id })).session.events.edges.map((e: any) => e.node);
const send = async (id: string, text: string) =>
  (await gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text })).sendMessage.inputId;
const turnEnds = (evs: any[]) => evs.filter((e) => e.type === 'turn/end');

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  killRunners();
  await service?.stop();
});

describe('the AI SDK adapter as an external runner process', () => {
  let runner: ReturnType<typeof startRunner>;
  let sessionId: string;

  beforeAll(() => {
    runner = startRunner('ai-sdk-1');
  });
  afterAll(() => stopRunner(runner)); // the next test's runners are the pool's only ones

  it('answers messages sent through GraphQL with turns that call its tool, seen on subscriptions', async () => {
    const created = (await gql(`mutation { createSession(input: {title: "external", runner: "ext"}) { id runner } }`)).createSession;
    sessionId = created.id;
    expect(created.runner).toBe('ext');
    const open = await openSubscriptions(service.url);
    const live = subscribeWs(service.url, `subscription($id: ID!) { sessionEvents(sessionId: $id) { seq type } }`, { id: sessionId });
    const turns = subscribeWs(service.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind turn text } }`, { id: sessionId });
    await subscriptionsOpened(service.url, open, 2); // both listen: the turn updates are live only (TURN_STARTED is not replayed)
    await live.count(1); // session/title
    await send(sessionId, 'weather in Oslo');
    await live.until((items) => items.some((i) => i.sessionEvents.type === 'turn/end'), 'the turn to end', 30_000);
    const evs = await events(sessionId);
    expect(evs.map((e: any) => e.type)).toEqual([
      'session/title',
      'inbox/add',
      // The claim wrote the turn's opening (startTurns); the declaration went with the runner's first batch, the call's.
      'inbox/remove',
      'turn/start',
      'step/start',
      'session/runner-tools',
      'model/message',
      'tool/result',
      'step/end',
      'step/start',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    // The runner declared its tools with their effects; its call is recorded with the declared one.
    expect(evs[5].data.tools.map((t: any) => [t.name, t.effect])).toEqual([
      ['lookup', 'read-only'],
      ['send_email', 'side-effects'],
    ]);
    expect(evs[6].data.toolCalls).toMatchObject([{ name: 'lookup', effect: 'read-only', arguments: JSON.stringify({ query: 'weather in Oslo' }) }]);
    expect(evs[7].data).toMatchObject({ status: 'ok', content: 'result for weather in Oslo', name: 'lookup' });
    expect(evs[10].data.text).toBe('Found: result for weather in Oslo');
    expect(evs[12].data).toMatchObject({ turn: 1, reason: 'completed' });
    await turns.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'TURN_ENDED');
    const kinds = turns.items.map((u) => u.sessionTurns.kind);
    expect(kinds).toEqual(expect.arrayContaining(['TURN_STARTED', 'TOOL_FINISHED', 'TEXT_DELTA', 'TURN_ENDED']));
    await live.close();
    await turns.close();

    // A second message: a second turn, on the conversation so far.
    await send(sessionId, 'and Bergen?');
    await waitFor(async () => turnEnds(await events(sessionId)).length === 2, { what: 'the second turn', timeoutMs: 30_000 });
    const prompts = fs
      .readFileSync(runner.promptLog, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    // The third model call (the second turn's first) saw the whole first turn.
    expect(prompts[2].map((m: any) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
  });

  it('continues a fork cut mid-call, sending its model what forkline would send (the synthetic result and its wording)', async () => {
    const evs = await events(sessionId);
    const call = evs.find((e: any) => e.type === 'model/message' && e.data.toolCalls.length > 0);
    const fork = (
      await gql(
        `mutation($id: ID!, $at: Int!) { forkSession(input: {sessionId: $id, atSeq: $at, message: "try again"}) { session { id runner firstLiveSeq } } }`,
        { id: sessionId, at: call.seq },
      )
    ).forkSession.session;
    expect(fork.runner).toBe('ext');
    await waitFor(async () => turnEnds(await events(fork.id)).some((e: any) => !e.synthetic), { what: 'the fork to be answered', timeoutMs: 30_000 });
    const childEvents = await events(fork.id);
    const synthetic = childEvents.find((e: any) => e.type === 'tool/result' && e.synthetic);
    expect(synthetic.data.content).toContain('No result for tool call "lookup"');
    // The model's first call for the fork: exactly forkline's conversation of the child, then its input.
    const prompts = fs
      .readFileSync(runner.promptLog, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const forkPrompt = prompts.find((p: any[]) => p.at(-1).role === 'user' && p.at(-1).content[0].text === 'try again');
    const ownTurn = childEvents.find((x: any) => x.type === 'turn/start' && x.seq >= fork.firstLiveSeq);
    const expected = toModelMessages(buildModelMessages(childEvents.filter((e: any) => e.seq <= ownTurn.seq)) as any);
    expect(forkPrompt.map((m: any) => m.role)).toEqual(expected.map((m) => m.role));
    const toolMessage = forkPrompt.find((m: any) => m.role === 'tool');
    expect(toolMessage.content[0].output.value).toBe(synthetic.data.content);
  });
});

describe('a runner SIGKILLed mid-turn', () => {
  it('is repaired once after its lease expires, and another runner answers the next input', async () => {
    const doomed = startRunner('doomed', { HANG: '1', LEASE_MS: '3000' });
    const id = (await gql(`mutation { createSession(input: {runner: "ext"}) { id } }`)).createSession.id;
    await send(id, 'please hang');
    // The first step (the tool call and its result) is stored; the second model call never answers.
    await waitFor(async () => (await events(id)).some((e: any) => e.type === 'step/end'), { what: 'the first step', timeoutMs: 30_000 });
    doomed.child.kill('SIGKILL');
    await new Promise((r) => doomed.child.once('exit', r));
    const heir = startRunner('heir');
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the repair', timeoutMs: 30_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nheir: ${heir.output()}\ndoomed: ${doomed.output()}`);
    });
    await send(id, 'now answer');
    await waitFor(async () => turnEnds(await events(id)).length === 2, { what: 'the heir to answer', timeoutMs: 30_000 });
    const evs = await events(id);
    const ends = turnEnds(evs);
    expect(ends[0]).toMatchObject({ synthetic: true, data: { turn: 1, reason: 'interrupted' } });
    expect(ends[1]).toMatchObject({ synthetic: false, data: { turn: 2, reason: 'completed' } });
    // The second step was open (its start stored before its model call), with no call in flight: its end and the turn's.
    expect(evs.filter((e: any) => e.synthetic).map((e: any) => [e.type, e.data.reason])).toEqual([
      ['step/end', 'interrupted'],
      ['turn/end', 'interrupted'],
    ]);
    expect(heir.output()).not.toContain('failed');
    // The dead runner's token writes nothing now: LEASE_LOST, the log unchanged.
    const claims = doomed
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{"claimed"'))
      .map((l) => JSON.parse(l));
    const stale = claims.find((c) => c.claimed === id).token;
    const late = await postGraphQL(service.url, `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`, {
      input: { sessionId: id, leaseToken: stale, expectedEventCount: evs.length, events: [{ type: 'plugin/late/note', data: {} }] },
    });
    expect(late.body.errors?.[0].extensions?.code).toBe('LEASE_LOST');
    expect(await events(id)).toEqual(evs);
  });
});

describe('the OpenAI Agents SDK adapter as an external runner process', () => {
  it('answers with a turn that calls its tool, each step written as it happens', async () => {
    const agents = startRunner('agents-1', { POOL: 'agents' }, 'agents-runner.ts');
    const id = (await gql(`mutation { createSession(input: {runner: "agents"}) { id } }`)).createSession.id;
    // From the log's start, then live: nothing written before it listens is missed.
    const live = subscribeWs(service.url, `subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq type } }`, { id });
    await send(id, 'capital of Norway');
    await waitFor(async () => turnEnds(await events(id)).length === 1, { what: 'the turn', timeoutMs: 30_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${agents.output()}`);
    });
    const evs = await events(id);
    expect(evs.map((e: any) => e.type)).toEqual([
      'inbox/add',
      // The claim wrote the turn's opening (startTurns); the declaration went with the runner's first batch, the call's.
      'inbox/remove',
      'turn/start',
      'step/start',
      'session/runner-tools',
      'model/message',
      'tool/result',
      'step/end',
      'step/start',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    expect(evs[5].data.toolCalls).toMatchObject([{ name: 'lookup', effect: 'read-only', arguments: JSON.stringify({ query: 'capital of Norway' }) }]);
    expect(evs[6].data).toMatchObject({ status: 'ok', content: 'result for capital of Norway', name: 'lookup' });
    expect(evs[9].data.text).toBe('Found: result for capital of Norway');
    expect(evs[11].data).toMatchObject({ turn: 1, reason: 'completed' });
    // Subscribers saw the turn as it was written.
    await live.until((items) => items.some((i) => i.sessionEvents.type === 'turn/end'), 'turn/end live');
    expect(live.items.map((i) => i.sessionEvents.type)).toEqual(evs.map((e: any) => e.type));
    await live.close();
    // A second input runs on the history the Session gives back.
    await send(id, 'and Sweden?');
    await waitFor(async () => turnEnds(await events(id)).length === 2, { what: 'the second turn', timeoutMs: 30_000 });
    expect((await events(id)).at(-1).data).toMatchObject({ turn: 2, reason: 'completed' });
    await stopRunner(agents);
  });
});
