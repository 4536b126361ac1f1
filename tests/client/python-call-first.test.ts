// "A call is in the log before its tool runs" (docs/runners.md) for the Python
// runner SDK (packages/python/forkline_runner), as a `python3` process
// serving a real server: each tool reads, at the moment it starts, what the
// server's log holds (GraphQL, straight from the server). Over several steps
// and several calls of one step, each call is stored, unanswered, when its
// tool starts (the calls before it answered: the SDK runs a step's tools one
// after another). And an append of the calls that fails — a 500, a connection
// cut, the lease taken by another runner — runs no tool. (A fork while the
// tool runs and a SIGKILL mid-tool: python-runner.test.ts.)
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

let app: TestApp;

/** How the proxy in front of the server breaks the append that stores a call (a model/message with calls). */
let fault: 'none' | '500' | 'cut' | 'lease' = 'none';
const proxy = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', async () => {
    if (fault !== 'none' && /"model\/message"/.test(raw) && /"toolCalls":\s*\[\{/.test(raw)) {
      if (fault === '500') {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
        return;
      }
      if (fault === 'cut') return void res.socket?.destroy();
      // Another runner takes the session while the call is on its way: the holder's lease is given back, then claimed.
      const { input } = JSON.parse(raw).variables as { input: { sessionId: string; leaseToken: number } };
      await app.ok(`mutation($i: LeaseInput!) { releaseSession(input: $i) { id } }`, { i: { sessionId: input.sessionId, leaseToken: input.leaseToken } });
      await app.ok(`mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } } }`, {
        i: { sessionId: input.sessionId, runnerId: 'thief', leaseMs: 30_000 },
      });
    }
    const upstream = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw });
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
    res.end(await upstream.text());
  });
});

let proxyUrl = '';
beforeAll(async () => {
  app = await startTestApp();
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`;
});
afterAll(async () => {
  proxy.close();
  await app.close();
});

async function logOf(id: string): Promise<Array<{ type: string; data: any }>> {
  const data = await app.ok(`query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { type data } } } } }`, { id });
  return data.session.events.edges.map((e: { node: { type: string; data: any } }) => e.node);
}

let sessionNo = 0;
/** A session with the model's steps as its message, served once by a Python process through `url`: its JSON lines. */
async function servePython(steps: string[][], url: string) {
  const pool = `py-call-first-${++sessionNo}`;
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: JSON.stringify({ steps }) } });
  const child = spawn('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_call_first.py')], {
    env: {
      ...process.env,
      PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'),
      FORKLINE_URL: url,
      PROBE_URL: app.url,
      SESSION_ID: id,
      POOL: pool,
      RETRY_FOR_S: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const code = await new Promise<number | null>((resolve, reject) => (child.on('error', reject), child.on('close', resolve)));
  expect(code, output).toBe(0);
  const lines = output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
  return { id, lines, output };
}

describe('the Python runner SDK', () => {
  it('has each call stored, unanswered, when its tool starts: several steps, several calls of a step', async () => {
    const { id, lines, output } = await servePython([['alpha', 'beta'], ['gamma']], app.url);
    expect(
      lines.filter((l) => l.ran),
      output,
    ).toEqual([
      { ran: 'alpha', stored: ['alpha', 'beta'], answered: [] },
      { ran: 'beta', stored: ['alpha', 'beta'], answered: ['alpha'] },
      { ran: 'gamma', stored: ['alpha', 'beta', 'gamma'], answered: ['alpha', 'beta'] },
    ]);
    expect(lines.at(-1)).toEqual({ served: 1 });
    expect((await logOf(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it.each([
    ['a 500', '500', 'ForklineError'],
    ['the connection cut', 'cut', 'ForklineError'],
    ['the lease taken by another runner', 'lease', 'LeaseLostError'],
  ] as const)(
    'runs no tool when the append of its calls meets %s',
    async (_what, how, raised) => {
      fault = how;
      try {
        const { id, lines, output } = await servePython([['send', 'alpha']], proxyUrl);
        expect(
          lines.filter((l) => l.ran),
          output,
        ).toEqual([]);
        expect(lines.at(-1), output).toMatchObject({ error: raised });
        const log = await logOf(id);
        expect(
          log.some((e) => e.type === 'model/message'),
          JSON.stringify(log),
        ).toBe(false);
      } finally {
        fault = 'none';
      }
    },
    60_000,
  );
});
