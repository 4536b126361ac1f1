// Idempotent mutations: a retry with the same key (after a lost response, or
// racing the first call) gets the first result and changes nothing; the same
// key with another input is refused; keys belong to a tenant and last 24 hours.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { A, B, TOKEN_A, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { waitFor } from '../helpers/wait.ts';
import { readFixture } from '../fixtures/recordings/recordings.ts';
import { REFERENCE_LOG } from '../spec/reference-log.ts';
import { createForklineClient, ForkSessionDocument, SendMessageDocument } from '@forkline/client';

let app: TestApp;
let parent: string;

beforeAll(async () => {
  app = await startTwoTenantApp();
  parent = (await app.services.store.createSession({ tenant: 'alpha' }, { title: 'parent' })).id;
  await app.services.store.append(parent, REFERENCE_LOG);
});
afterAll(() => app.close());

const FORK = `mutation($i: ForkSessionInput!, $k: String) { forkSession(input: $i, idempotencyKey: $k) { cutSeq session { id } syntheticEvents { seq type } } }`;
const SEND = `mutation($i: SendMessageInput!, $k: String) { sendMessage(input: $i, idempotencyKey: $k) { inputId event { id seq } } }`;
const children = async () => (await app.db.pool.query(`SELECT count(*)::int AS n FROM "Session" WHERE "parentId" = $1`, [parent])).rows[0].n as number;
const inboxAdds = async (id: string) =>
  (await app.db.pool.query(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = $1 AND type = 'inbox/add'`, [id])).rows[0].n as number;

describe('idempotency keys', () => {
  it('a fork retried with its key returns the first child; a different input with the key is refused', async () => {
    const before = await children();
    const first = await app.gql(FORK, { i: { sessionId: parent, atSeq: 10 }, k: 'fork-1' }, A);
    const again = await app.gql(FORK, { i: { sessionId: parent, atSeq: 10 }, k: 'fork-1' }, A);
    expect(again.data).toEqual(first.data);
    expect(first.data.forkSession.syntheticEvents.map((e: any) => e.type)).toEqual(['step/end', 'turn/end']); // seq 10 opens a step here (the title came first)
    expect(await children()).toBe(before + 1);
    const other = await app.gql(FORK, { i: { sessionId: parent, atSeq: 11 }, k: 'fork-1' }, A);
    expect(other.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(other.errors?.[0].message).toMatch(/idempotencyKey "fork-1" was already used for a different request/);
    expect(await children()).toBe(before + 1);
  });

  it('ten calls racing with one key make one child, and all ten answer with it', async () => {
    const before = await children();
    const results = await Promise.all(Array.from({ length: 10 }, () => app.gql(FORK, { i: { sessionId: parent, atSeq: 20 }, k: 'race' }, A)));
    expect(results.every((r) => !r.errors)).toBe(true);
    expect(new Set(results.map((r) => r.data.forkSession.session.id)).size).toBe(1);
    expect(await children()).toBe(before + 1);
  });

  it('a fork whose response was lost (the connection dropped after sending) and is retried makes one child', async () => {
    const before = await children();
    const body = JSON.stringify({ query: FORK, variables: { i: { sessionId: parent, atSeq: 15 }, k: 'lost-response' } });
    const { port } = new URL(app.url);
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.end(
          `POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: ${A.authorization}\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        socket.destroy(); // gone before any answer
        resolve();
      });
    });
    const retried = await app.gql(FORK, { i: { sessionId: parent, atSeq: 15 }, k: 'lost-response' }, A);
    expect(retried.errors).toBeUndefined();
    await waitFor(async () => (await children()) >= before + 1, { what: 'the first call to finish' });
    await new Promise((r) => setTimeout(r, 200));
    expect(await children()).toBe(before + 1);
    const again = await app.gql(FORK, { i: { sessionId: parent, atSeq: 15 }, k: 'lost-response' }, A);
    expect(again.data.forkSession.session.id).toBe(retried.data.forkSession.session.id);
  });

  it('the typed client sends a key by default and retries a lost response with it: one message', async () => {
    const session = (await app.services.store.createSession({ tenant: 'alpha' }, { title: 'client' })).id;
    let calls = 0;
    // The first response is lost after the server handled the request.
    const lossy: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (++calls === 1) {
        await res.text();
        throw new TypeError('fetch failed: socket hang up');
      }
      return res;
    };
    const client = createForklineClient({ url: app.url, token: TOKEN_A, fetch: lossy });
    const { sendMessage } = await client.mutate(SendMessageDocument, { input: { sessionId: session, text: 'only once, please' } });
    expect(calls).toBe(2);
    expect(await inboxAdds(session)).toBe(1);
    expect(sendMessage.event.seq).toBe(1);
    // Without a retry budget, the lost response is the caller's error.
    const strict = createForklineClient({ url: app.url, token: TOKEN_A, fetch: lossy, retryForMs: 0 });
    calls = 0;
    await expect(strict.mutate(ForkSessionDocument, { input: { sessionId: parent, atSeq: 3 } })).rejects.toMatchObject({ code: 'NETWORK_ERROR' });
    await app.services.host.idle();
  });

  it('sendMessage, createSession, deleteSession, importRecording and POST /recordings honour keys', async () => {
    const s = (await app.services.store.createSession({ tenant: 'alpha' }, { title: 'send' })).id;
    const a = await app.gql(SEND, { i: { sessionId: s, text: 'hi' }, k: 'send-1' }, A);
    const b = await app.gql(SEND, { i: { sessionId: s, text: 'hi' }, k: 'send-1' }, A);
    expect(b.data).toEqual(a.data);
    expect(await inboxAdds(s)).toBe(1);

    const CREATE = `mutation($k: String) { createSession(input: { title: "once" }, idempotencyKey: $k) { id } }`;
    const c1 = await app.gql(CREATE, { k: 'create-1' }, A);
    const c2 = await app.gql(CREATE, { k: 'create-1' }, A);
    expect(c2.data.createSession.id).toBe(c1.data.createSession.id);

    const DELETE = `mutation($id: ID!, $k: String) { deleteSession(id: $id, idempotencyKey: $k) { deletedSessionIds } }`;
    const d1 = await app.gql(DELETE, { id: c1.data.createSession.id, k: 'delete-1' }, A);
    const d2 = await app.gql(DELETE, { id: c1.data.createSession.id, k: 'delete-1' }, A); // not SESSION_NOT_FOUND: the first answer again
    expect(d2).toEqual(d1);

    const recording = readFixture('v4-completed-tools.jsonl');
    const IMPORT = `mutation($r: String!, $k: String) { importRecording(recording: $r, idempotencyKey: $k) { id } }`;
    const i1 = await app.gql(IMPORT, { r: recording, k: 'import-1' }, A);
    const i2 = await app.gql(IMPORT, { r: recording, k: 'import-1' }, A);
    expect(i2.data.importRecording.id).toBe(i1.data.importRecording.id);

    const upload = (key: string, body = recording) =>
      fetch(app.url.replace(/graphql$/, 'recordings'), {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson', 'idempotency-key': key, ...A },
        body,
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
    const u1 = await upload('upload-1');
    const u2 = await upload('upload-1');
    expect(u1.status).toBe(201);
    expect(u2.body.session.id).toBe(u1.body.session.id);
    const changed = await upload('upload-1', recording.replace('What time is it', 'What day is it'));
    expect(changed.status).toBe(400);
    expect(changed.body.errors[0].message).toMatch(/already used for a different request/);
  });

  it('keys belong to a tenant, and are forgotten after 24 hours', async () => {
    const bParent = (await app.services.store.createSession({ tenant: 'beta' }, { title: 'b parent' })).id;
    await app.services.store.append(bParent, REFERENCE_LOG);
    const a = await app.gql(FORK, { i: { sessionId: parent, atSeq: 5 }, k: 'shared-key' }, A);
    const b = await app.gql(FORK, { i: { sessionId: bParent, atSeq: 5 }, k: 'shared-key' }, B);
    expect(b.errors).toBeUndefined();
    expect(b.data.forkSession.session.id).not.toBe(a.data.forkSession.session.id);

    await app.db.pool.query(`UPDATE "IdempotencyKey" SET "createdAt" = now() - interval '25 hours' WHERE key = 'shared-key' AND tenant = 'alpha'`);
    expect(await app.services.controller.forgetOldIdempotencyKeys()).toBe(1);
    const fresh = await app.gql(FORK, { i: { sessionId: parent, atSeq: 5 }, k: 'shared-key' }, A);
    expect(fresh.data.forkSession.session.id).not.toBe(a.data.forkSession.session.id);
  });
});
