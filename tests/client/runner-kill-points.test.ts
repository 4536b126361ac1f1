// "A call is in the log before its tool runs" (docs/runners.md "Why the call
// goes first") at the two moments a runner can die around a tool: after the
// call's append and before the tool (KILL_AT=before-tool: the process SIGKILLs
// itself as the tool starts, before its effect), and after the tool and before
// the result's append (KILL_AT=after-tool: right after the effect). With the
// real @forkline/runner and both adapters (`ai`, `@openai/agents`), through a
// real server: the log holds the call and no result either way; a second
// runner's claim repairs the turn once (cause interrupted, worded from the
// declared effect: the log cannot tell the two apart, so it says the effect
// is unknown), and never runs the tool again.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { killRunners, startRunnerProcess, stopRunner } from '../helpers/runner-process.ts';
import { waitFor } from '../helpers/wait.ts';

let service: ServiceProcess;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-runner-kill-'));

async function gql(query: string, variables?: Record<string, unknown>) {
  const { body } = await postGraphQL(service.url, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}
const EVENTS = `query($id: ID!) { session(id: $id) { status runnerHolder events(first: 500) { edges { node { seq type data synthetic } } } } }`;
const read = async (id: string) => {
  const s = (await gql(EVENTS, { id })).session;
  return { status: s.status as string, holder: s.runnerHolder as string | null, events: s.events.edges.map((e: any) => e.node) as any[] };
};
const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []);

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  killRunners();
  await service?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const CASES = [
  { adapter: 'AI SDK', script: 'ai-sdk-runner.ts', killAt: 'before-tool', effects: 0 },
  { adapter: 'AI SDK', script: 'ai-sdk-runner.ts', killAt: 'after-tool', effects: 1 },
  { adapter: 'OpenAI Agents', script: 'agents-runner.ts', killAt: 'before-tool', effects: 0 },
  { adapter: 'OpenAI Agents', script: 'agents-runner.ts', killAt: 'after-tool', effects: 1 },
] as const;

describe.each(CASES)('the $adapter adapter, its runner killed $killAt', ({ script, killAt, effects: effectsDone }) => {
  it('leaves the call in the log without a result; the next runner repairs it once and does not run the tool again', async () => {
    const tag = `${script.replace(/\W/g, '')}-${killAt}`;
    const pool = `kill-${tag}`;
    const effects = path.join(dir, `${tag}.effects`);
    const env = { POOL: pool, EFFECTS_FILE: effects, RELEASE_FILE: path.join(dir, `${tag}.release`) };
    fs.writeFileSync(env.RELEASE_FILE, ''); // a tool run again would not wait
    const doomed = startRunnerProcess(service.url, { name: `${tag}-doomed`, dir, script, env: { ...env, KILL_AT: killAt, LEASE_MS: '3000' } });
    const id = (await gql(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
    await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "email dave"}) { inputId } }`, { id });
    await new Promise((resolve) => doomed.child.once('exit', resolve));
    expect(doomed.child.signalCode).toBe('SIGKILL');

    // What the log says: the call, with the effect the runner declared, and no result; the turn still open.
    const left = await read(id);
    const message = left.events.find((e) => e.type === 'model/message');
    expect(message?.data.toolCalls, doomed.output()).toMatchObject([{ name: 'send_email', effect: 'side-effects' }]);
    expect(left.events.filter((e) => e.type === 'tool/result')).toEqual([]);
    expect(left.events.at(-1).type).toBe('model/message');
    expect(left.status).toBe('RUNNING');
    expect(lines(effects)).toHaveLength(effectsDone);

    // What a second runner does: its claim closes the turn (once), and it answers the next input without sending the email again.
    const heir = startRunnerProcess(service.url, { name: `${tag}-heir`, dir, script, env });
    const ends = async () => (await read(id)).events.filter((e) => e.type === 'turn/end');
    await waitFor(async () => (await ends()).length === 1, { what: 'the repair', timeoutMs: 30_000 });
    await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "and look up the weather"}) { inputId } }`, { id });
    await waitFor(async () => (await ends()).length === 2, { what: 'the heir to answer', timeoutMs: 30_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify((await read(id)).events)}\nheir: ${heir.output()}`);
    });
    const { events } = await read(id);
    const closers = events.filter((e) => e.synthetic);
    expect(closers.map((e) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end']);
    expect(closers[0].data).toMatchObject({ callId: message.data.toolCalls[0].id, status: 'interrupted', name: 'send_email' });
    expect(closers[0].data.content).toContain('"send_email" has side effects: it may already have changed the world');
    expect(closers[2].data).toEqual({ turn: 1, reason: 'interrupted' });
    // Only the heir's own lookup ran afterwards: one result per call, the email's the repair's.
    const results = events.filter((e) => e.type === 'tool/result');
    expect(results.map((e) => [e.data.name, e.synthetic])).toEqual([
      ['send_email', true],
      ['lookup', false],
    ]);
    expect(lines(effects)).toHaveLength(effectsDone);
    await stopRunner(heir);
  }, 90_000);
});
