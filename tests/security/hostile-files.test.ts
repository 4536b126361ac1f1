// A hostile tenant's paths at every door that writes file change sets
// (docs/files.md, docs/operations.md "Threat model"): a recording (POST
// /recordings and importRecording) and a runner's appendEvents refuse a path
// the file tools refuse, naming it, and write nothing; a change set stored
// before that rule (written here straight into the table) is refused where the
// tree is made on disk, and reported by the start-up check.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { appendEvents, calledRunnerSession, importRecording, postRecording, recordingOf, runnerFileBatch, sessionCount, sha256 } from './hostile-doors.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
let base: string;
let root: string;
const content = Buffer.from('#!/bin/sh\necho pwned\n');
const hash = sha256(content);

/** Paths a change set must never carry: each leaves the workspace, is not the one spelling of a file in it, or has a name no disk holds (over 255 bytes). */
const HOSTILE_PATHS = [
  '../escape.sh',
  'a/../../escape.sh',
  '/tmp/escape.sh',
  '..',
  'a/..',
  'a\\..\\b',
  './a.txt',
  'a//b.txt',
  '',
  '.',
  'x'.repeat(1025),
  'n'.repeat(256),
  `d/${'€'.repeat(86)}`,
];
/** A NUL is refused before any path rule: no stored text holds one. */
const NUL_PATH = '../x\u0000y';

beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-files-'));
  root = path.join(base, 'ws');
  app = await startTestApp({ workspacesDir: root });
});
afterAll(async () => {
  await app.close();
  fs.rmSync(base, { recursive: true, force: true });
});

/** Nothing exists beside the workspaces' root: no path resolved out of it. */
const nothingEscaped = () => expect(fs.readdirSync(base).filter((n) => n !== 'ws')).toEqual([]);

describe('a recording naming a hostile path', () => {
  it('is refused by POST /recordings with BAD_USER_INPUT naming the path and its line; nothing is written', async () => {
    for (const p of HOSTILE_PATHS) {
      const before = await sessionCount(app);
      const r = await postRecording(app, recordingOf([{ path: p, hash, size: content.byteLength }], [content]));
      expect(r.status, p).toBe(400);
      expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(r.body.errors[0].message).toContain('line 7');
      expect(r.body.errors[0].message).toContain(`path ${JSON.stringify(p)} is refused`);
      expect(await sessionCount(app)).toBe(before);
    }
    const nul = await postRecording(app, recordingOf([{ path: NUL_PATH, hash, size: content.byteLength }], [content]));
    expect(nul.status).toBe(400);
    expect(nul.body.errors[0].message).toMatch(/line 7: .*NUL/);
    nothingEscaped();
  });

  it('is refused by importRecording alike', async () => {
    for (const p of HOSTILE_PATHS) {
      const before = await sessionCount(app);
      const r = await importRecording(app, recordingOf([{ path: p, hash, size: content.byteLength }], [content]));
      expect(r.errors?.[0].extensions?.code, p).toBe('BAD_USER_INPUT');
      expect(r.errors![0].message).toContain(`path ${JSON.stringify(p)} is refused`);
      expect(await sessionCount(app)).toBe(before);
    }
  });

  it('a change set of another shape (no hash format, a negative size, extra fields) is refused too', async () => {
    for (const change of [
      { path: 'a.txt', hash: 'not-a-hash', size: 1 },
      { path: 'a.txt', hash, size: -1 },
      { path: 'a.txt', hash, size: 1, mode: 0o4755 },
      { path: 42, hash, size: 1 },
    ]) {
      const r = await importRecording(app, recordingOf([change as never], [content]));
      expect(r.errors?.[0].extensions?.code, JSON.stringify(change)).toBe('BAD_USER_INPUT');
    }
  });
});

describe("a runner's appendEvents naming a hostile path", () => {
  it('is refused with BAD_USER_INPUT naming the event and the path; the log is unchanged', async () => {
    for (const p of HOSTILE_PATHS) {
      const s = await calledRunnerSession(app);
      const r = await appendEvents(app, s, runnerFileBatch([{ path: p, hash, size: content.byteLength }]));
      expect(r.errors?.[0].extensions?.code, p).toBe('BAD_USER_INPUT');
      expect(r.errors![0].message).toContain(`path ${JSON.stringify(p)} is refused`);
      const after = await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: s.id });
      expect(after.session.eventCount).toBe(s.eventCount);
    }
    const s = await calledRunnerSession(app);
    const nul = await appendEvents(app, s, runnerFileBatch([{ path: NUL_PATH, hash, size: content.byteLength }]));
    expect(nul.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    nothingEscaped();
  });
});

describe('change sets that make a path a file and a directory at once', () => {
  // No disk holds both: such a tree could never be made for a fork, so no door takes it.
  const clash = [
    { path: 'a/b.txt', hash, size: content.byteLength },
    { path: 'a', hash, size: content.byteLength },
  ];
  it('are refused by POST /recordings, importRecording and appendEvents, naming the path; nothing is written', async () => {
    const before = await sessionCount(app);
    const posted = await postRecording(app, recordingOf(clash, [content]));
    expect(posted.status).toBe(400);
    expect(posted.body.errors[0].message).toContain('"a" would be both a file and a directory');
    const imported = await importRecording(app, recordingOf(clash, [content]));
    expect(imported.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(imported.errors![0].message).toContain('"a" would be both a file and a directory');
    expect(await sessionCount(app)).toBe(before);
    // A runner's batch carries no content: the tenant holds it once a recording carried it.
    expect((await importRecording(app, recordingOf([{ path: 'held.sh', hash, size: content.byteLength }], [content]))).errors).toBeUndefined();
    const s = await calledRunnerSession(app);
    const appended = await appendEvents(app, s, runnerFileBatch(clash));
    expect(appended.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(appended.errors![0].message).toContain('"a" would be both a file and a directory');
  });

  it('stored before the rule, refuse the restore with that reason', async () => {
    const { createSession } = await app.ok(`mutation { createSession(input: { title: "clash row" }) { id } }`);
    const id = createSession.id as string;
    const write = (p: string) => `!call write_file ${JSON.stringify({ path: p, content: 'x' })}`;
    await app.ok(`mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }`, {
      id,
      t: `${write('a/b.txt')}\n!then\n${write('c')}`,
    });
    await app.services.host.idle();
    // The second change set's path rewritten as an unchecked door once stored it: "a", a file beside a/b.txt.
    const client = await app.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL session_replication_role = replica`);
      const updated = await client.query(
        `UPDATE "Event" SET data = jsonb_set(data, '{changes,0,path}', to_jsonb('a'::text)) WHERE "sessionId" = $1 AND type = 'plugin/files/change' AND data->'changes'->0->>'path' = 'c'`,
        [id],
      );
      expect(updated.rowCount).toBe(1);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const { forkSession } = await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id });
    const child = forkSession.session.id as string;
    await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "!call list_files {}" }) { inputId } }`, { id: child });
    await app.services.host.idle();
    const results = (await app.services.store.log.page(child, -1, 100)).filter((e) => e.type === 'tool/result');
    expect(results.at(-1)!.data).toMatchObject({ name: 'list_files', status: 'error' });
    expect(anyData(results.at(-1)!).content).toBe('the files of this session cannot be made: "a" would be both a file and a directory');
  });
});

describe('a change set stored before the rule', () => {
  it('is refused where the tree is made (a file tool, a fork), and the start-up check reports its session', async () => {
    const { createSession } = await app.ok(`mutation { createSession(input: { title: "old row" }) { id } }`);
    const id = createSession.id as string;
    await app.ok(
      `mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "!call write_file {\\"path\\":\\"run.sh\\",\\"content\\":\\"fine\\"}" }) { inputId } }`,
      { id },
    );
    await app.services.host.idle();
    // A row as an unchecked door once stored it: the change set's path rewritten to leave the workspace.
    const target = path.join(base, 'escape.sh');
    // <root>/<session>/../../escape.sh is <base>/escape.sh. (Events are immutable: the trigger is bypassed as a replica would.)
    const client = await app.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL session_replication_role = replica`);
      const updated = await client.query(
        `UPDATE "Event" SET data = jsonb_set(data, '{changes,0,path}', to_jsonb($2::text)) WHERE "sessionId" = $1 AND type = 'plugin/files/change'`,
        [id, '../../escape.sh'],
      );
      expect(updated.rowCount).toBe(1);
      await client.query('COMMIT');
    } finally {
      client.release();
    }

    const change = (await app.services.store.log.page(id, -1, 100)).find((e) => e.type === 'plugin/files/change')!;
    const { forkSession } = await app.ok(`mutation($id: ID!, $at: Int!) { forkSession(input: { sessionId: $id, atSeq: $at }) { session { id } } }`, {
      id,
      at: change.seq + 1,
    });
    const child = forkSession.session.id as string;
    await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "!call list_files {}" }) { inputId } }`, { id: child });
    await app.services.host.idle();
    const results = (await app.services.store.log.page(child, -1, 100)).filter((e) => e.type === 'tool/result');
    expect(results.at(-1)!.data).toMatchObject({ name: 'list_files', status: 'error' });
    expect(anyData(results.at(-1)!).content).toContain('is refused');
    expect(fs.existsSync(target)).toBe(false);
    nothingEscaped();

    expect((await app.services.store.files.refusedChangeSets()).map((f) => f.sessionId)).toContain(id);
    // A process starting on this database says so (a warning naming the session), and starts.
    const logged: string[] = [];
    const second = await startTestApp({ databaseUrl: app.db.url, workspacesDir: root, log: (m) => void logged.push(m) });
    try {
      await waitFor(async () => logged.some((m) => m.includes('file change set') && m.includes(id)));
    } finally {
      await second.close();
    }
  });
});
