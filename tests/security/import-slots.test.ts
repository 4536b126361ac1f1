// Recording imports and the database pool (docs/operations.md "Memory and
// time"): each import runs in one long transaction on a pool connection, so a
// process runs at most FORKLINE_MAX_IMPORTS_AT_ONCE of them; the others wait
// for a slot holding no connection (their uploader sees `queued` progress),
// and other tenants' requests are served meanwhile. Before, six tenants
// uploading two 200,000-event recordings each took the whole pool: another
// tenant's sessions query waited 10 s for a connection and got 503.
// Driven, not timed: a deferred trigger holds every new session's COMMIT on an
// advisory lock the test holds (as recording-cancel.test.ts does), so an
// import that has its slot keeps its connection until the test lets it go.
import { spawn } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppOptions } from '../../src/app.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { wsClient } from '../helpers/subscribe.ts';
import { commitsWaiting as commitsWaitingOn, holdCommits, locksWaitedFor, oneEventRecording } from '../helpers/held-commits.ts';

const TSX = `${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`;

const LOCK = 4343;
const POOL_MAX = 4;
const TOKENS = ['alpha', 'beta', 'gamma'].map((tenant) => [`${tenant}-token-0123456789abcdef`, tenant] as const);
const as = (i: number) => ({ authorization: `Bearer ${TOKENS[i][0]}` });

let app: TestApp;
/** The test's own connection, outside the service's pool: it holds the lock. */
let holder: pg.Client;
/** The database of the service `startHeld` started last. */
let heldUrl: string;

/** A service on a database of its own whose new sessions' COMMITs wait on LOCK; `holder` connected to it. */
async function startHeld(opts: Partial<AppOptions>): Promise<TestApp> {
  const databaseUrl = (heldUrl = await createTestDatabase());
  const started = await startTestApp({ databaseUrl, ...opts });
  await holdCommits(started.db.pool, String(LOCK));
  await holder?.end();
  holder = new pg.Client({ connectionString: databaseUrl });
  await holder.connect();
  return started;
}

beforeAll(async () => {
  app = await startHeld({ poolMax: POOL_MAX, security: { rateLimit: false, apiTokens: new Map(TOKENS) } });
});
afterAll(async () => {
  await holder?.end();
  await app?.close();
});

/** Imports whose COMMIT waits on the lock: each holds a pool connection. */
const commitsWaiting = () => commitsWaitingOn(holder, LOCK);
const recording = (title: string) => oneEventRecording(title, 'ses_slot');

/** An upload asking for progress: its answer's JSON lines once it ends. */
function upload(tenant: number, title: string, signal?: AbortSignal, headers: Record<string, string> = {}, to: TestApp = app) {
  return fetch(to.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson', accept: 'application/x-ndjson', ...as(tenant), ...headers },
    body: recording(title),
    signal,
  }).then(async (res) => ({
    status: res.status,
    lines: (await res.text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l)),
  }));
}

describe('recording imports and the pool', () => {
  it('run at most FORKLINE_MAX_IMPORTS_AT_ONCE at once (default: a quarter of the pool); the rest wait, queued, and other tenants are served', async () => {
    await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
    const gone = new AbortController();
    // Two tenants, two uploads each (their own cap): four imports for a pool of four.
    const uploads = [upload(0, 'a1'), upload(0, 'a2'), upload(1, 'b1')];
    let released = false;
    try {
      await expect.poll(commitsWaiting, { timeout: 15_000, interval: 20 }).toBe(1);
      // The fourth comes once a slot is taken: it waits in the queue.
      uploads.push(upload(1, 'b2', gone.signal).catch((err: Error) => ({ status: 0, lines: [err.name] })));
      // A moment more: none of the others gets a connection (the old code gave each its own: 3 waited, the 4th took the last).
      await new Promise((r) => setTimeout(r, 1000));
      expect(await commitsWaiting()).toBe(1);
      // Another tenant's read is served while the import holds its connection (before: it waited for one, then 503).
      const t = performance.now();
      const read = await app.gql('{ sessionCount sessions(first: 5) { edges { node { id } } } }', {}, as(2));
      expect(read.errors, JSON.stringify(read.errors)).toBeUndefined();
      expect(read.data.sessionCount).toBe(0);
      expect(performance.now() - t).toBeLessThan(5_000);
      // A queued uploader that leaves is dropped from the queue: it imports nothing.
      gone.abort();
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      released = true;
      const done = await Promise.all(uploads);
      for (const r of done.slice(0, 3)) {
        expect(r.status).toBe(200);
        expect(r.lines.at(-1)).toMatchObject({ status: 201 });
      }
      // Those that waited said so while they waited: queued, nothing read yet.
      const queued = done.slice(0, 3).flatMap((r) => r.lines.filter((l) => l.progress?.queued === true));
      expect(queued.length).toBeGreaterThan(0);
      for (const l of queued) expect(l.progress).toMatchObject({ bytes: 0, lines: 0 });
      expect(done[3].status).toBe(0);
      const titles = (await holder.query<{ title: string }>(`SELECT title FROM "Session" ORDER BY title`)).rows.map((r) => r.title);
      expect(titles).toEqual(['a1', 'a2', 'b1']);
    } finally {
      if (!released) await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    }
  }, 60_000);
});

describe('one recording sent twice at once with one Idempotency-Key', () => {
  it('is imported once: the second waits for the first and is answered with its session (before: both imported, one rolled back)', async () => {
    await app.close();
    // Two slots: room for both.
    app = await startHeld({ poolMax: 8, importsAtOnce: 2, security: { rateLimit: false, apiTokens: new Map(TOKENS) } });
    await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
    const key = { 'idempotency-key': 'twice-at-once' };
    const first = upload(0, 'twice', undefined, key);
    await expect.poll(commitsWaiting, { timeout: 15_000, interval: 20 }).toBe(1);
    const second = upload(0, 'twice', undefined, key);
    try {
      // The second has been spooled and handed to the import by now; it runs no import of its own (before: it
      // imported the whole recording, then its key's insert waited on the first's).
      await new Promise((r) => setTimeout(r, 1000));
      expect(await commitsWaiting()).toBe(1);
      expect(await locksWaitedFor(holder)).toEqual(['advisory']);
    } finally {
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    }
    const [a, b] = await Promise.all([first, second]);
    expect(a.lines.at(-1)).toMatchObject({ status: 201 });
    expect(b.lines.at(-1)).toMatchObject({ status: 201, session: { id: a.lines.at(-1).session.id } });
    expect((await holder.query(`SELECT id FROM "Session"`)).rowCount).toBe(1);
  }, 60_000);
});

describe('one recording sent twice at once with one Idempotency-Key to two processes', () => {
  it('is imported once: the second waits at the key for the first to commit, reading nothing, and is answered with its session (before: both imported, one rolled back at its key)', async () => {
    await app.close();
    const opts = { poolMax: 8, importsAtOnce: 2, security: { rateLimit: false as const, apiTokens: new Map(TOKENS) } };
    app = await startHeld(opts);
    const other = await startTestApp({ ...opts, databaseUrl: heldUrl });
    let released = false;
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
      const key = { 'idempotency-key': 'twice-two-processes' };
      const first = upload(0, 'twice', undefined, key);
      await expect.poll(commitsWaiting, { timeout: 15_000, interval: 20 }).toBe(1);
      const second = upload(0, 'twice', undefined, key, other);
      // The second waits on the key's claim (an advisory lock) before it reads the recording; before, it imported the
      // whole recording and then waited on the first's key row (a transactionid lock), only to roll back.
      await expect.poll(() => locksWaitedFor(holder), { timeout: 15_000, interval: 20 }).toEqual(['advisory', 'advisory']);
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      released = true;
      const [a, b] = await Promise.all([first, second]);
      // Answered 201, or 200 with progress lines and the outcome last (an answer within 250 ms has none).
      expect(a.status === 201 || a.lines.at(-1).status === 201).toBe(true);
      expect(b.status === 201 || b.lines.at(-1).status === 201).toBe(true);
      expect(b.lines.at(-1).session.id).toBe(a.lines.at(-1).session.id);
      // What the second said while it waited: nothing of its recording read.
      for (const l of b.lines.filter((l) => l.progress)) expect(l.progress).toMatchObject({ bytes: 0, lines: 0 });
      expect((await holder.query(`SELECT id FROM "Session"`)).rowCount).toBe(1);
    } finally {
      if (!released) await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      await other.close();
    }
  }, 60_000);
});

describe('`forkline import` while its upload waits for a slot', () => {
  it('says it waits for an import slot, then imports (before: "importing … 0 lines" for as long as it waited)', async () => {
    await app.close();
    app = await startHeld({ poolMax: 4, importsAtOnce: 1, security: { rateLimit: false, apiTokens: new Map(TOKENS) } });
    await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
    const file = path.join(os.tmpdir(), `forkline-slot-${process.pid}.jsonl`);
    fs.writeFileSync(file, recording('from the cli'));
    let released = false;
    try {
      const first = upload(0, 'holds the slot');
      await expect.poll(commitsWaiting, { timeout: 15_000, interval: 20 }).toBe(1);
      const child = spawn(process.execPath, [TSX, `${PROJECT_ROOT}client/cli.ts`, 'import', file, '--progress'], {
        cwd: PROJECT_ROOT,
        env: { ...process.env, FORKLINE_URL: app.url, FORKLINE_TOKEN: TOKENS[1][0] },
      });
      let stderr = '';
      child.stderr.on('data', (c) => (stderr += c));
      const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
      await expect.poll(() => stderr, { timeout: 30_000, interval: 50 }).toMatch(/waiting for an import slot on the server…/);
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      released = true;
      expect(await closed, stderr).toBe(0);
      expect(stderr).toMatch(/imported \S+: 1 events/);
      expect((await first).lines.at(-1)).toMatchObject({ status: 201 });
    } finally {
      if (!released) await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      fs.rmSync(file, { force: true });
    }
  }, 60_000);
});

const IMPORT_MUTATION = 'mutation($r: String!) { importRecording(recording: $r) { id } }';

/**
 * Tenant 1's importRecording queued behind tenant 0's upload, which holds the one slot: `send` sends it and returns
 * how its client goes (resolved once the client's own side of it has ended). It must leave the queue and its tenant's
 * count while the slot is still held, and nothing but the first upload is imported once the slot is free.
 */
async function clientGoesWhileQueued(send: (variables: { r: string }) => () => Promise<void>) {
  await app.close();
  app = await startHeld({ poolMax: 4, importsAtOnce: 1, security: { rateLimit: false, apiTokens: new Map(TOKENS) } });
  await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
  let released = false;
  try {
    const first = upload(0, 'holds the slot');
    await expect.poll(commitsWaiting, { timeout: 15_000, interval: 20 }).toBe(1);
    const leave = send({ r: recording('gone') });
    const slots = () => app.services.controller.importSlots('beta');
    await expect.poll(slots, { timeout: 15_000, interval: 20 }).toEqual({ admitted: 1, waiting: 1 });
    await leave();
    // Out of the queue and off its tenant's count while the slot is still held.
    await expect.poll(slots, { timeout: 15_000, interval: 20 }).toEqual({ admitted: 0, waiting: 0 });
    await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    released = true;
    expect((await first).lines.at(-1).session.title).toBe('holds the slot');
    // Nothing imported once the slot was free (before: the queued import ran then: a session titled `gone`).
    await expect.poll(() => app.services.controller.importSlots('alpha'), { timeout: 15_000, interval: 20 }).toEqual({ admitted: 0, waiting: 0 });
    const titles = (await holder.query<{ title: string }>(`SELECT title FROM "Session" ORDER BY title`)).rows.map((r) => r.title);
    expect(titles).toEqual(['holds the slot']);
  } finally {
    if (!released) await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
  }
}

describe('an importRecording mutation whose client goes while it waits for a slot', () => {
  it("leaves the queue and its tenant's count at once, and imports nothing (before: it waited on holding its recording, then imported for nobody)", async () => {
    await clientGoesWhileQueued((variables) => {
      const gone = new AbortController();
      const mutation = fetch(app.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...as(1) },
        body: JSON.stringify({ query: IMPORT_MUTATION, variables }),
        signal: gone.signal,
      }).catch((err: Error) => err.name);
      return async () => {
        gone.abort();
        expect(await mutation).toBe('AbortError');
      };
    });
  }, 60_000);

  it("sent over graphql-ws: the socket closing takes it out of the queue and off its tenant's count, and it imports nothing", async () => {
    await clientGoesWhileQueued((variables) => {
      const client = wsClient(app.url, { connectionParams: as(1) });
      const answers: unknown[] = [];
      const ended = new Promise<string>((resolve) =>
        client.subscribe(
          { query: IMPORT_MUTATION, variables },
          { next: (r) => void answers.push(r), error: () => resolve('error'), complete: () => resolve('complete') },
        ),
      );
      return async () => {
        await client.dispose();
        // graphql-ws's client completes an operation whose socket it closed itself (a 1000 close once disposed), it
        // does not fail it: a wait for its answer or its error alone would never end.
        expect(await ended).toBe('complete');
        expect(answers).toEqual([]);
      };
    });
  }, 60_000);
});

describe('POST /recordings from a tenant whose imports are at FORKLINE_MAX_IMPORTS_PER_TENANT', () => {
  it('is refused 429 with Retry-After before its body is read (before: the body was spooled whole, then refused)', async () => {
    await app.close();
    app = await startHeld({ poolMax: 4, importsAtOnce: 1, importsPerTenant: 1, security: { rateLimit: false, apiTokens: new Map(TOKENS) } });
    await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
    let released = false;
    const url = new URL(app.url.replace(/\/graphql$/, '/recordings'));
    // Announces 8 MiB and sends 64 KiB of it, then nothing: an answer can only come before the body is read.
    const req = http.request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson', 'content-length': String(8 << 20), ...as(0) },
    });
    req.on('error', () => {}); // the server closes the connection once it has answered
    try {
      const first = upload(0, 'holds the share');
      await expect.poll(commitsWaiting, { timeout: 15_000, interval: 20 }).toBe(1);
      const answered = new Promise<http.IncomingMessage>((resolve) => req.on('response', resolve));
      req.write(Buffer.alloc(64 << 10, 0x20));
      let res: http.IncomingMessage | undefined;
      void answered.then((r) => (res = r));
      await expect.poll(() => res?.statusCode, { timeout: 15_000, interval: 20 }).toBe(429);
      expect(res!.headers['retry-after']).toBe('5');
      // Its body unread, the connection cannot carry another request: the server says so and closes it.
      expect(res!.headers.connection).toBe('close');
      const body = JSON.parse(
        await new Promise<string>((resolve) => {
          let text = '';
          res!.on('data', (c) => (text += c)).on('end', () => resolve(text));
        }),
      );
      expect(body.errors[0].extensions.code).toBe('RATE_LIMITED');
      expect(body.errors[0].message).toMatch(/FORKLINE_MAX_IMPORTS_PER_TENANT/);
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      released = true;
      expect((await first).lines.at(-1).session.title).toBe('holds the share');
    } finally {
      req.destroy();
      if (!released) await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    }
  }, 60_000);
});
