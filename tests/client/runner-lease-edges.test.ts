// A runner paused past its lease, with two real runner processes (the AI SDK
// runner, tests/fixtures/runners/ai-sdk-runner.ts) and SIGSTOP/SIGCONT
// (docs/runners.md "When the lease ends"). Runner A stores a `send_email` call
// and is stopped right before its tool starts; its lease runs out. Whether
// runner B claims the session meanwhile (and repairs the call as one in
// flight, "check before repeating it") or nobody has yet, A resumes and must
// not run the tool: it checks its lease at the act, by its own clock, and
// gives the session up. The tool then ran nowhere, and the log says its effect
// is unknown: it never ran twice, nor once behind the back of the runner that
// holds the session.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { killRunners, startRunnerProcess, type RunnerProcess } from '../helpers/runner-process.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-lease-edges-'));

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  killRunners();
  await app?.close();
});

const events = async (id: string) =>
  (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data as any, synthetic: e.synthetic }));
const exited = (r: RunnerProcess) =>
  r.child.exitCode !== null || r.child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => r.child.once('exit', resolve));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a runner stopped between its stored call and its tool, past its lease', () => {
  it.each([
    ['another runner claims the session meanwhile', true],
    ['nobody has claimed the session yet', false],
  ])('does not run the tool when it resumes: %s', async (_case, otherClaims) => {
    const pool = `paused-${otherClaims ? 'claimed' : 'unclaimed'}`;
    const { id } = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession;
    await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "email bob"}) { inputId } }`, { id });
    const effects = path.join(dir, `${pool}.effects`);
    const release = path.join(dir, `${pool}.release`);
    const stall = path.join(dir, `${pool}.stall`);
    fs.writeFileSync(release, ''); // send_email returns as soon as it has written its effect
    const env = { POOL: pool, SESSION_ID: id, EFFECTS_FILE: effects, RELEASE_FILE: release };
    const a = startRunnerProcess(app.url, { name: `${pool}-a`, dir, env: { ...env, LEASE_MS: '3000', STALL_FILE: stall } });
    await waitFor(() => a.output().includes('"stalled"'), { what: "A's call stored, its tool not started", timeoutMs: 30_000 });
    a.child.kill('SIGSTOP');
    const stored = await events(id);
    expect(stored.filter((e) => e.type === 'model/message').map((e) => e.data.toolCalls[0].name)).toEqual(['send_email']);
    await sleep(3500); // past A's lease
    if (otherClaims) {
      const b = startRunnerProcess(app.url, { name: `${pool}-b`, dir, env });
      await exited(b);
      expect(b.output()).toContain('"served"');
    }
    fs.writeFileSync(stall, '');
    a.child.kill('SIGCONT');
    await exited(a);
    expect(a.output()).toContain('"failed":"LeaseLostError"');
    expect(fs.existsSync(effects) ? fs.readFileSync(effects, 'utf8') : '').toBe('');
    if (!otherClaims) {
      // Nothing A wrote after its lease ran out went in; the next claim closes what it left.
      expect(await events(id)).toEqual(stored);
      const b = startRunnerProcess(app.url, { name: `${pool}-b`, dir, env });
      await exited(b);
    }
    // Its call is answered by the repair only: the effect is unknown, and the model is told to check before repeating it.
    const log = await events(id);
    const results = log.filter((e) => e.type === 'tool/result');
    expect(results.map((e) => [e.data.status, e.synthetic])).toEqual([['interrupted', true]]);
    expect(results[0].data.content).toMatch(/send_email" has side effects: it may already have changed the world, so check its effect/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'interrupted' }, synthetic: true });
  });
});
