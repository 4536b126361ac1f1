// The typed client (@forkline/client) against a hostile proxy (a real HTTP
// server): an answer is read only up to maxResponseBytes and within
// responseTimeoutMs, an error page only up to its excerpt, and the token never
// reaches an error's text, nor through the runner SDK a session's log
// (docs/api.md, "The typed client"; docs/runners.md, Refused batches).
//
// - A 200 answer larger than maxResponseBytes fails RESPONSE_TOO_LARGE once
//   that much has come (before: held whole, then parsed).
// - An answer that trickles a byte at a time, or an error page that never ends,
//   fails RESPONSE_TIMEOUT / with its first 64 KiB (before: the call never returned).
// - A 413 page that repeats the request's Authorization header leaves the
//   token out of the thrown error (before: `Bearer fkt_…` in its message); a
//   runner whose append is refused so writes the turn's error without it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateSessionDocument, createForklineClient, ForklineClientError, SessionsDocument } from '@forkline/client';
import { ForklineRunner } from '@forkline/runner';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const TOKEN = 'fkt_echoed-token-0123456789abcdefghijklmnopq';
let app: TestApp;
const servers: http.Server[] = [];

/** A server answering every request with `answer`; its URL's /graphql. */
async function serve(answer: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void): Promise<string> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => answer(req, res, body));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
}

/** Writes `chunk` again and again, as fast as the reader takes it, until the connection closes; counts the bytes sent. */
function endless(res: http.ServerResponse, chunk: string, sent: { bytes: number }) {
  const more = () => {
    while (!res.destroyed) {
      sent.bytes += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', more);
    }
  };
  more();
}

const echoHeaders = (req: http.IncomingMessage) =>
  `413 Request Entity Too Large\nyou sent:\n${Object.entries(req.headers)
    .map(([k, v]) => `${k}: ${String(v)}`)
    .join('\n')}\n`;

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));
const failure = (p: Promise<unknown>) =>
  p.then(
    () => expect.unreachable('the call resolved'),
    (err: unknown) => err as ForklineClientError,
  );

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  await app?.close();
});

describe('the typed client against a hostile proxy', () => {
  it('stops reading an answer over maxResponseBytes', async () => {
    const sent = { bytes: 0 };
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"data":{"sessions":"');
      endless(res, 'a'.repeat(64 * 1024), sent);
    });
    const client = createForklineClient({ url, retryForMs: 0, maxResponseBytes: 1024 * 1024 });
    const err = await failure(client.query(SessionsDocument, { first: 1 }));
    expect(err).toBeInstanceOf(ForklineClientError);
    expect(err.code).toBe('RESPONSE_TOO_LARGE');
    expect(err.message).toMatch(/is over 1048576 bytes \(maxResponseBytes\)/);
  });

  it('gives up on an answer that trickles past responseTimeoutMs', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(timer));
    });
    const client = createForklineClient({ url, retryForMs: 0, responseTimeoutMs: 500 });
    const err = await failure(client.query(SessionsDocument, { first: 1 }));
    expect(err.code).toBe('RESPONSE_TIMEOUT');
    // An event page is bounded the same way.
    const page = await failure(client.eventPage('s1'));
    expect(page.code).toBe('RESPONSE_TIMEOUT');
  });

  it("lets a mutation work past responseTimeoutMs before it answers, and bounds the answer's body from its headers", async () => {
    // A mutation may work for long before it answers (an import waiting for a slot, a compaction waiting for a turn).
    const slow = await serve((_req, res) => {
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ data: { createSession: { id: 'ses_late' } } }));
      }, 900);
    });
    const client = createForklineClient({ url: slow, retryForMs: 0, responseTimeoutMs: 300 });
    expect(await client.mutate(CreateSessionDocument, { input: {} })).toEqual({ createSession: { id: 'ses_late' } });
    // Its headers came: what follows is due within the deadline.
    const trickling = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(timer));
    });
    const err = await failure(createForklineClient({ url: trickling, retryForMs: 0, responseTimeoutMs: 300 }).mutate(CreateSessionDocument, { input: {} }));
    expect(err.code).toBe('RESPONSE_TIMEOUT');
  });

  it('tries a query again when its answer did not come whole in time, as after a lost connection', async () => {
    let requests = 0;
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (++requests > 1) return void res.end(JSON.stringify({ data: { sessions: { edges: [] } } }));
      const timer = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(timer));
    });
    const client = createForklineClient({ url, retryForMs: 10_000, responseTimeoutMs: 300 });
    expect(await client.query(SessionsDocument, { first: 1 })).toEqual({ sessions: { edges: [] } });
    expect(requests).toBe(2);
  });

  it('reads only the start of an error page that never ends', async () => {
    const sent = { bytes: 0 };
    const url = await serve((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      endless(res, `<p>${'bad gateway '.repeat(1000)}</p>\n`, sent);
    });
    const client = createForklineClient({ url, retryForMs: 0 });
    const err = await failure(client.query(SessionsDocument, { first: 1 }));
    expect(err.code).toBe('HTTP_502');
    expect(err.message).toMatch(/^HTTP 502: <p>bad gateway/);
    const download = await failure(client.downloadRecording('s1'));
    expect(download.code).toBe('HTTP_502');
  });

  it("keeps the token out of the error when a proxy's refusal repeats the request's headers", async () => {
    const url = await serve((req, res) => {
      res.writeHead(413, { 'content-type': 'text/plain' }).end(`authorization: ${String(req.headers.authorization)}\n${echoHeaders(req)}`);
    });
    const client = createForklineClient({ url, token: TOKEN, retryForMs: 0 });
    const calls = [
      () => client.query(SessionsDocument, { first: 1 }),
      () => client.eventPage('s1'),
      () => client.downloadRecording('s1'),
      () => client.uploadRecording('{}\n'),
    ];
    for (const call of calls) {
      const err = await failure(call());
      expect(err.code).toBe('HTTP_413');
      expect(err.message).toContain('authorization: Bearer [token]');
      expect(JSON.stringify(err)).not.toContain(TOKEN.slice(0, 8));
    }
  });

  it("keeps the token out of the turn's error a runner writes when a proxy refuses its append with the request's headers", async () => {
    const upstream = app.url;
    const url = await serve(async (req, res, body) => {
      if (body.includes('appendEvents') && body.includes('model/message')) {
        res.writeHead(413, { 'content-type': 'text/plain' }).end(`authorization: ${String(req.headers.authorization)}\n${echoHeaders(req)}`);
        return;
      }
      const answer = await fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json', accept: String(req.headers.accept) }, body });
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(await answer.text());
    });
    const pool = 'client-bounds-echo';
    const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
    await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "refused"}) { inputId } }`, { id });

    const runner = new ForklineRunner({ url, pool, token: TOKEN, retryForMs: 0 });
    let refused: unknown;
    try {
      await runner.serve(id, async (session) => {
        const turn = session.turn(await session.modelRequest());
        await turn.startStep();
        // A call is written at once (docs/runners.md, "Why the call goes first"): the proxy refuses it.
        refused = await turn.message({ text: '', toolCalls: [{ id: 'call_1', name: 'send', arguments: '{}' }] }).then(
          () => undefined,
          (err: unknown) => err,
        );
        await turn.end('failed', errorText(refused));
      });
    } finally {
      await runner.close();
    }
    expect((refused as ForklineClientError).code).toBe('HTTP_413');
    expect(errorText(refused)).not.toContain(TOKEN.slice(0, 8));

    const log = (await app.ok(`query($id: ID!) { session(id: $id) { events(first: 100) { edges { node { type data } } } } }`, { id })).session.events.edges.map(
      (e: { node: { type: string; data: any } }) => e.node,
    );
    const error = log.find((e: { type: string }) => e.type === 'plugin/agent/error');
    expect(error.data.message).toContain('authorization: Bearer [token]');
    expect(JSON.stringify(log)).not.toContain(TOKEN.slice(0, 8));
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });
});
