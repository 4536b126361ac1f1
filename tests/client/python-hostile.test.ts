// The Python runner SDK (packages/python/forkline_runner) against hostile
// code of its own side: a `python3` runner process
// (tests/fixtures/runners/python_hostile.py, Runner.run) serving a pool of a
// real forkline server, whose tools fail in ways a team's tools do.
//
// - A tool's failure is stored as its output is (docs/runners.md, "The Python
//   SDK"): a message over max_result_bytes, one whose str() raises, an output
//   nested past Python's recursion limit — each an `error` result saying the
//   tool ran, and the turn goes on to the model's answer. (Before, the first
//   made a batch over the server's body limit and failed the turn; the others
//   escaped run_turns and left the turn open.)
// - A tool that never returns: the step's time bound ends its turn and takes
//   the lease (FORKLINE_RUNNER_MAX_STEP_MS); the thread still runs (Python
//   cannot stop it), but it holds none of the runner's room and the runner's
//   stop does not wait for it. (Before, it held its slot for good: a runner of
//   concurrency 1 served nothing more, and never stopped.)
// - A model's calls with an empty id or name are recorded as the TypeScript
//   SDK records them (docs/runners.md#call-ids): under `call_<position>` (a
//   name as "unnamed"), answered as not run, while the step's other calls run.
//   (Before, the whole reply was refused and the turn failed.) A reply is
//   written as it was checked, each field read once (before, a subclass whose
//   calls changed after the check escaped run_turns and left the turn open).
// - A proxy in front of forkline: a claim answered 503 with `Retry-After:
//   100000` pauses the runner at most max_backoff_s (before: that long); an
//   append forwarded and stored, whose answer then trickles a byte at a time
//   without end, is given up after timeout_s and recognised as stored on the
//   retry (before: the call never returned); a 413 page that repeats the
//   request's Authorization header leaves the token out of the error the
//   turn's end records (before: `Bearer fkt_…` in plugin/agent/error).
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startService, type ServiceProcess } from '../helpers/process.ts';
import { serviceReads } from '../helpers/python-process.ts';
import { waitFor } from '../helpers/wait.ts';

let service: ServiceProcess;
const proxies: http.Server[] = [];
const started: ChildProcess[] = [];
/** The server's body limit: a result over it would be a refused batch. */
const MAX_BODY_BYTES = 2 * 1024 * 1024;

beforeAll(async () => {
  service = await startService({ env: { FORKLINE_MAX_BODY_BYTES: String(MAX_BODY_BYTES), FORKLINE_RUNNER_MAX_STEP_MS: '2000' } });
});
afterAll(async () => {
  for (const p of proxies) {
    p.closeAllConnections();
    p.close();
  }
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await service?.stop();
});

const { gql, events } = serviceReads(() => service.url);
async function session(pool: string, ask: Record<string, unknown>) {
  const id = (await gql(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: JSON.stringify(ask) });
  return id;
}
const turnEnd = async (id: string) => (await events(id)).find((e: any) => e.type === 'turn/end');

function startRunner(pool: string, env: Record<string, string> = {}) {
  const child = spawn('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_hostile.py')], {
    env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'), FORKLINE_URL: service.url, POOL: pool, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

describe('the Python runner SDK with hostile tools', () => {
  it("stores a tool's failure as its output: a message over max_result_bytes, a str() that raises, an output past the recursion limit", async () => {
    const pool = 'py-hostile-failures';
    const runner = startRunner(pool, { RAISE_BYTES: String(3 * 1024 * 1024) });
    const ids = {
      raise_big: await session(pool, { tool: 'raise_big' }),
      bad_str: await session(pool, { tool: 'bad_str' }),
      deep: await session(pool, { tool: 'deep' }),
    };
    for (const [tool, id] of Object.entries(ids)) {
      const end = await waitFor(() => turnEnd(id), { what: `${tool}'s turn to end\n${runner.output()}` });
      const log = await events(id);
      const results = log.filter((e: any) => e.type === 'tool/result').map((e: any) => [e.data.status, e.data.content]);
      expect(results, tool).toHaveLength(1);
      const [status, content] = results[0];
      expect(status, tool).toBe('error');
      expect(content, tool).toMatch(
        {
          raise_big:
            /^the tool ran, but its output \(3145741 bytes\) is over this runner's limit of 1000000 bytes \(max_result_bytes\), so it was not recorded$/,
          bad_str: /^tool failed: Unprintable \(its message could not be read\)$/,
          deep: /^the tool ran, but its output could not be recorded: it is not JSON \(maximum recursion depth exceeded/,
        }[tool]!,
      );
      // The model read the result and answered: the turn completed, the session is free.
      expect(end.data.reason, tool).toBe('completed');
      expect(log.filter((e: any) => e.type === 'model/message').map((e: any) => e.data.text)).toEqual(['', 'done']);
    }
    runner.child.kill('SIGTERM');
    expect(await runner.exited, runner.output()).toBe(0);
  });

  it('records calls with an empty id or name, or an id another call took, under ids the log holds, answered as not run; the others run', async () => {
    const pool = 'py-hostile-ids';
    const runner = startRunner(pool);
    const id = await session(pool, { tool: 'echo', calls: 4, ids: ['a', 'a', '', 'b'], names: ['echo', 'echo', 'echo', ''] });
    const end = await waitFor(() => turnEnd(id), { what: `the turn to end\n${runner.output()}` });
    expect(end.data.reason).toBe('completed');
    const log = await events(id);
    const message = log.find((e: any) => e.type === 'model/message');
    expect(message.data.toolCalls.map((c: any) => [c.id, c.name])).toEqual([
      ['a', 'echo'],
      ['call_2', 'echo'],
      ['call_3', 'echo'],
      ['b', 'unnamed'],
    ]);
    expect(log.filter((e: any) => e.type === 'tool/result').map((e: any) => [e.data.callId, e.data.status, e.data.content])).toEqual([
      ['a', 'ok', 'ok'],
      ['call_2', 'error', 'not run: the model gave it the id of another call of this step (a)'],
      ['call_3', 'error', 'not run: the model gave it an id of 0 characters (1-200 allowed)'],
      ['b', 'error', 'not run: the model named a tool of 0 characters (1-200 allowed)'],
    ]);
    expect(runner.output().match(/"ran"/g)).toHaveLength(1);
    runner.child.kill('SIGTERM');
    expect(await runner.exited, runner.output()).toBe(0);
  });

  it('writes the reply it checked: a ModelReply subclass whose calls change after they were read is used as read', async () => {
    const pool = 'py-hostile-lying';
    const runner = startRunner(pool);
    const id = await session(pool, { lying: true });
    const end = await waitFor(() => turnEnd(id), { what: `the turn to end\n${runner.output()}` });
    expect(end.data.reason).toBe('completed');
    const log = await events(id);
    expect(log.find((e: any) => e.type === 'model/message').data.toolCalls.map((c: any) => c.id)).toEqual(['call_0']);
    expect(log.filter((e: any) => e.type === 'tool/result').map((e: any) => [e.data.callId, e.data.status, e.data.content])).toEqual([['call_0', 'ok', 'ok']]);
    runner.child.kill('SIGTERM');
    expect(await runner.exited, runner.output()).toBe(0);
  });

  it('holds no room for a tool that never returns once its session is lost, and stops without waiting for it', async () => {
    const pool = 'py-hostile-hang';
    const runner = startRunner(pool, { CONCURRENCY: '1', LEASE_MS: '1500' });
    const hung = await session(pool, { tool: 'hang' });
    // The step's bound ends the turn at a renewal (the tool still runs in the runner's process).
    const end = await waitFor(() => turnEnd(hung), { what: `the hung turn to be ended\n${runner.output()}` });
    expect(end.data.reason).toBe('failed');
    const error = (await events(hung)).find((e: any) => e.type === 'plugin/agent/error');
    expect(error.data.message).toMatch(/FORKLINE_RUNNER_MAX_STEP_MS/);

    // The runner's one slot is free again: the next session is served.
    const next = await session(pool, { text: 'hello' });
    const nextEnd = await waitFor(() => turnEnd(next), { what: `the next session to be served\n${runner.output()}` });
    expect(nextEnd.data.reason).toBe('completed');

    runner.child.kill('SIGTERM');
    expect(await runner.exited, runner.output()).toBe(0);
    expect(runner.output()).toContain('{"stopped": true}');
  });
});

/** A proxy in front of the service: `answer` may answer a request itself (the body read), else it is forwarded. */
async function startProxy(answer: (body: string, res: http.ServerResponse, forward: () => Promise<string>) => boolean): Promise<string> {
  const proxy = http.createServer((req, res) => {
    res.on('error', () => undefined);
    if (req.headers.accept?.includes('text/event-stream')) return void res.writeHead(404).end(); // no subscription: the runner polls
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      const forward = () => fetch(service.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.text());
      if (!answer(body, res, forward)) {
        void forward().then((text) => res.writeHead(200, { 'content-type': 'application/json' }).end(text));
      }
    });
  });
  proxies.push(proxy);
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`;
}

describe('the Python runner SDK behind a hostile proxy', () => {
  it('waits at most max_backoff_s after a Retry-After of 100000 s, and gives up a trickled answer after timeout_s', async () => {
    const pool = 'py-hostile-proxy';
    let refused = 0;
    let trickled = 0;
    const url = await startProxy((body, res, forward) => {
      if (body.includes('claimSessions') && refused === 0) {
        refused++;
        res
          .writeHead(503, { 'content-type': 'application/json', 'retry-after': '100000' })
          .end('{"errors":[{"message":"busy","extensions":{"code":"SERVICE_UNAVAILABLE"}}]}');
        return true;
      }
      if (body.includes('appendEvents') && body.includes('turn/end') && trickled === 0) {
        trickled++;
        // Stored by the service; its answer never comes whole.
        void forward().then(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          const timer = setInterval(() => res.write(' '), 100);
          res.on('close', () => clearInterval(timer));
        });
        return true;
      }
      return false;
    });
    const id = await session(pool, { text: 'through the proxy' });
    const runner = startRunner(pool, { FORKLINE_URL: url, MAX_BACKOFF_S: '0.5', TIMEOUT_S: '2' });
    const end = await waitFor(() => turnEnd(id), { what: `the turn to end\n${runner.output()}` });
    expect(end.data.reason).toBe('completed');
    expect([refused, trickled]).toEqual([1, 1]);
    // The retried append found its batch stored: written once, and the runner went on to stop cleanly.
    const log = await events(id);
    expect(log.filter((e: any) => e.type === 'turn/end')).toHaveLength(1);
    runner.child.kill('SIGTERM');
    expect(await runner.exited, runner.output()).toBe(0);
    expect(runner.output()).toContain('{"stopped": true}');
  });

  it("keeps the token out of the turn's error when a proxy's refusal repeats the request's headers", async () => {
    const pool = 'py-hostile-echo';
    const token = 'fkt_echoed-token-0123456789abcdefghijklmnopq';
    const url = await startProxy((body, res) => {
      if (!(body.includes('appendEvents') && body.includes('model/message'))) return false;
      res.writeHead(413, { 'content-type': 'text/plain' }).end(`too large; you sent authorization: ${String(res.req.headers.authorization)}`);
      return true;
    });
    const id = await session(pool, { text: 'refused' });
    const runner = startRunner(pool, { FORKLINE_URL: url, TOKEN: token });
    const end = await waitFor(() => turnEnd(id), { what: `the turn to end\n${runner.output()}` });
    expect(end.data.reason).toBe('failed');
    const error = (await events(id)).find((e: any) => e.type === 'plugin/agent/error');
    expect(error.data.message).toContain('you sent authorization: Bearer [token]');
    expect(JSON.stringify(await events(id))).not.toContain(token);
    runner.child.kill('SIGTERM');
    expect(await runner.exited, runner.output()).toBe(0);
    expect(runner.output()).not.toContain(token);
  });
});
