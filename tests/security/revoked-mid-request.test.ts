// A token revoked while a request of its own is under way (docs/operations.md
// "API tokens"): a recording upload still sending its body stops and is
// answered 401 with nothing imported, and so is one whose import is committing;
// a subscription over SSE or an AG-UI run
// whose body was still arriving never opens (before, each ran after the
// revocation: the upload imported, the stream stayed open, the run wrote its
// message); a request whose body had arrived still gets its answer (a token
// revoking itself); an open graphql-ws socket closes with 4401, whether its
// token came in connectionParams or in the upgrade's header.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';

const ADMIN = 'alpha-bootstrap-0123456789abcdef';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const CREATE = 'mutation($input: CreateApiTokenInput!) { createApiToken(input: $input) { secret token { id } } }';
const REVOKE = 'mutation($id: ID!) { revokeApiToken(id: $id) { id status } }';

let app: TestApp;
let sessionId: string;
let uploadDir: string;
const LOCK = 4343;

beforeAll(async () => {
  uploadDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-revoked-uploads-'));
  app = await startTestApp({ uploadDir, security: { apiTokens: new Map([[ADMIN, 'alpha']]), rateLimit: false } });
  sessionId = (await app.gql('mutation { createSession(input: { title: "watched" }) { id } }', {}, bearer(ADMIN))).data.createSession.id;
  // A new session's COMMIT waits while the test holds this advisory lock (tests/graphql/recording-cancel.test.ts).
  await app.db.pool.query(`CREATE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock_shared(${LOCK}); RETURN NULL; END $$`);
  await app.db.pool.query(`CREATE CONSTRAINT TRIGGER test_hold_commit AFTER INSERT ON "Session" DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION test_hold_commit()`);
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(uploadDir, { recursive: true, force: true });
});

async function createToken(name: string, scopes: string[]): Promise<{ secret: string; id: string }> {
  const r = await app.gql(CREATE, { input: { name, scopes } }, bearer(ADMIN));
  expect(r.errors).toBeUndefined();
  return { secret: r.data.createApiToken.secret, id: r.data.createApiToken.token.id };
}

/** The server admitted a request of this token: its use is recorded (a fresh token has none). */
const admitted = (id: string) =>
  waitFor(
    async () => {
      const r = await app.gql('{ apiTokens { id lastUsedAt } }', {}, bearer(ADMIN));
      return r.data.apiTokens.find((t: { id: string }) => t.id === id)?.lastUsedAt;
    },
    { what: 'the request admitted' },
  );

interface Slow {
  /** Sends the rest of the body. */
  finish(rest: string): void;
  /** The answer (status and body), or how the connection ended without one. */
  outcome: Promise<{ status?: number; body: string; cut: boolean }>;
}

/** A request whose body is sent in two parts, the second when the test says. */
function slowRequest(door: string, headers: Record<string, string>, first: string): Slow {
  const req = http.request(new URL(door, app.url), { method: 'POST', headers });
  const outcome = new Promise<{ status?: number; body: string; cut: boolean }>((resolve) => {
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body, cut: false }));
      res.on('error', () => resolve({ status: res.statusCode, body, cut: true }));
      res.on('aborted', () => resolve({ status: res.statusCode, body, cut: true }));
    });
    req.on('error', () => resolve({ body: '', cut: true }));
  });
  req.write(first);
  return {
    finish: (rest) => {
      if (!req.destroyed) req.end(rest);
    },
    outcome,
  };
}

const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;

describe('a token revoked while its request is under way', () => {
  it('stops a recording upload still sending its body: 401, nothing imported', async () => {
    const { secret, id } = await createToken('uploader', ['WRITE']);
    const header = { format: 'forkline.recording', version: 4, session: { id: 'ses_revoked_upload', title: 'uploaded after revocation' } };
    const lines = [header, ...Array.from({ length: 50 }, (_, n) => ({ seq: n, type: 'session/title', data: { title: `t${n}` } }))].map(
      (l) => JSON.stringify(l) + '\n',
    );
    const before = await sessionCount();
    const upload = slowRequest('/recordings', { 'content-type': 'application/x-ndjson', ...bearer(secret) }, lines.slice(0, 10).join(''));
    await admitted(id);
    // Spooling: the first part is on disk.
    await waitFor(() => fs.readdirSync(uploadDir).some((f) => fs.statSync(path.join(uploadDir, f)).size > 0), { what: 'the upload spooling' });
    expect((await app.gql(REVOKE, { id }, bearer(ADMIN))).data.revokeApiToken.status).toBe('REVOKED');
    upload.finish(lines.slice(10).join(''));
    const { status, body } = await upload.outcome;
    expect(status).toBe(401);
    expect(JSON.parse(body).errors[0]).toMatchObject({
      extensions: { code: 'UNAUTHENTICATED' },
      message: expect.stringMatching(/revoked or expired during the upload: nothing was imported/),
    });
    expect(await sessionCount()).toBe(before);
    expect((await app.gql('{ session(id: "ses_revoked_upload") { id } }', {}, bearer(ADMIN))).data.session).toBeNull();
  });

  it('stops a recording upload whose import is committing: 401, the session discarded', async () => {
    const { secret, id } = await createToken('importer', ['WRITE']);
    const recording = `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_revoked_import', title: 'imported after revocation' } })}\n`;
    const holder: pg.PoolClient = await app.db.pool.connect();
    await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
    const lockCount = async (granted: boolean | null) =>
      (
        await app.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND ($2::boolean IS NULL OR granted = $2)`,
          [LOCK, granted],
        )
      ).rows[0].n;
    try {
      const before = await sessionCount();
      const upload = slowRequest('/recordings', { 'content-type': 'application/x-ndjson', ...bearer(secret) }, '');
      upload.finish(recording);
      await waitFor(async () => (await lockCount(false)) === 1, { what: "the import's COMMIT waiting" });
      await app.gql(REVOKE, { id }, bearer(ADMIN));
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      const { status, body } = await upload.outcome;
      expect(status).toBe(401);
      expect(JSON.parse(body).errors[0].extensions.code).toBe('UNAUTHENTICATED');
      await waitFor(async () => (await lockCount(null)) === 0, { what: 'the held transaction ended' });
      expect(await sessionCount()).toBe(before);
    } finally {
      holder.release();
    }
  });

  it('never opens an SSE subscription whose body was still arriving', async () => {
    const { secret, id } = await createToken('subscriber', ['READ']);
    const body = JSON.stringify({ query: 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq type } }', variables: { id: sessionId } });
    const sse = slowRequest(
      '/graphql',
      { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': String(Buffer.byteLength(body)), ...bearer(secret) },
      body.slice(0, 20),
    );
    await admitted(id);
    await app.gql(REVOKE, { id }, bearer(ADMIN));
    sse.finish(body.slice(20));
    // Events appended after the revocation: an open stream would carry them.
    await app.gql('mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "after the revocation") { id } }', { id: sessionId }, bearer(ADMIN));
    const outcome = await sse.outcome;
    expect(outcome.body).not.toContain('session/title');
    expect(outcome.cut || (outcome.status ?? 0) >= 400).toBe(true);
  });

  it('never runs an AG-UI run whose body was still arriving', async () => {
    const { secret, id } = await createToken('agui runner', ['WRITE']);
    const input = JSON.stringify({
      threadId: sessionId,
      runId: 'run-after-revocation',
      state: {},
      messages: [{ id: 'm-after-revocation', role: 'user', content: 'written after the revocation' }],
      tools: [],
      context: [],
      forwardedProps: {},
    });
    const run = slowRequest(
      '/agui',
      { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': String(Buffer.byteLength(input)), ...bearer(secret) },
      input.slice(0, 20),
    );
    await admitted(id);
    await app.gql(REVOKE, { id }, bearer(ADMIN));
    run.finish(input.slice(20));
    const outcome = await run.outcome;
    expect(outcome.body).not.toContain('RUN_STARTED');
    const texts = await app.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = $1 AND type = 'inbox/add' AND data->>'text' = 'written after the revocation'`,
      [sessionId],
    );
    expect(texts.rows[0].n).toBe(0);
  });

  it('still answers a request whose body had arrived: a token revoking itself gets its answer', async () => {
    const { secret, id } = await createToken('self-revoking admin', ['ADMIN']);
    const r = await app.gql(REVOKE, { id }, bearer(secret));
    expect(r.status).toBe(200);
    expect(r.data.revokeApiToken).toMatchObject({ id, status: 'REVOKED' });
    expect((await app.gql('{ __typename }', {}, bearer(secret))).status).toBe(401);
  });
});

describe('a token revoked while its WebSocket is open', () => {
  it.each([
    ['in connectionParams', false],
    ['in the upgrade header only (the fallback)', true],
  ])('%s: the socket closes with 4401 and its subscription ends', async (_name, inHeader) => {
    const { secret, id } = await createToken(`socket-${inHeader}`, ['READ']);
    const Impl = class extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols, { headers: inHeader ? bearer(secret) : {} });
      }
    };
    let closed: (code: number) => void;
    const closeCode = new Promise<number>((r) => (closed = r));
    const client = createClient({
      url: app.url.replace(/^http/, 'ws'),
      webSocketImpl: Impl,
      retryAttempts: 0,
      connectionParams: inHeader ? {} : bearer(secret),
      on: { closed: (e: any) => closed(e.code) },
    });
    const seqs: number[] = [];
    const ended = new Promise<unknown>((resolve) =>
      client.subscribe(
        { query: 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', variables: { id: sessionId } },
        { next: (r: any) => seqs.push(r.data.sessionEvents.seq), error: resolve, complete: () => resolve('completed') },
      ),
    );
    try {
      await waitFor(() => seqs.length > 0, { what: 'the subscription delivering' });
      await admitted(id);
      expect((await app.gql(REVOKE, { id }, bearer(ADMIN))).data.revokeApiToken.status).toBe('REVOKED');
      expect(await closeCode).toBe(4401);
      await ended;
    } finally {
      await client.dispose();
    }
  });
});
