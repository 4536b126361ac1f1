// Quotas on every tree (docs/files.md "Limits", docs/operations.md "Threat
// model"): files, bytes and directories count however they arrive (a
// recording, a runner's batch, the shell, a tool's path); a tenant's
// workspaces share a total on this process's disk, idle ones evicted and made
// again on demand; deleting a session during its restore stops the restore and
// leaves no directory; a write that fails leaves the old content and records
// nothing.
import fs from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  appendEvents,
  calledRunnerSession,
  filesUnder,
  importRecording,
  postRecording,
  recordingOf,
  runnerFileBatch,
  sessionCount,
  sha256,
} from './hostile-doors.ts';

const MAX_BYTES = 1_000_000;
const MAX_ENTRIES = 50;
const TENANT_MAX_BYTES = 1500;

let app: TestApp;
let root: string;
/** What a workspace write does instead of fs.writeFile, while a test sets it. */
let onWrite: ((abs: string, bytes: Uint8Array, file: FileHandle) => Promise<void>) | undefined;

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-quota-'));
  app = await startTestApp({
    workspacesDir: root,
    shell: true,
    workspaceLimits: { maxBytes: MAX_BYTES, maxFiles: MAX_ENTRIES },
    tenantWorkspacesMaxBytes: TENANT_MAX_BYTES,
    workspaceWriteBytes: (file, bytes, abs) => (onWrite ? onWrite(abs, bytes, file) : file.writeFile(bytes)),
  });
});
afterAll(async () => {
  await app.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const { create, turn, log, results } = agentTurns(() => app, 'quota');
const write = (p: string, content: string) => `!call write_file ${JSON.stringify({ path: p, content })}`;
const changeSets = async (id: string) => (await log(id)).filter((e) => e.type === 'plugin/files/change').length;

describe('a tree from outside counts toward the quota', () => {
  it('a 1.4 MB recording naming one 1 MiB content under 200 paths is refused, nothing written', async () => {
    const big = Buffer.alloc(1024 * 1024, 7);
    const hash = sha256(big);
    const before = await sessionCount(app);
    const r = await postRecording(
      app,
      recordingOf(
        Array.from({ length: 200 }, (_, i) => ({ path: `f${i}.bin`, hash, size: big.byteLength })),
        [big],
      ),
    );
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toMatch(/line 7: the change set at seq 5: (the workspace quota is 1000000 bytes|a file holds)/);
    expect(await sessionCount(app)).toBe(before);
  });

  it('files and the directories their paths make count as entries (importRecording)', async () => {
    const c = Buffer.from('x');
    const hash = sha256(c);
    const many = await importRecording(
      app,
      recordingOf(
        Array.from({ length: MAX_ENTRIES + 1 }, (_, i) => ({ path: `f${i}`, hash, size: 1 })),
        [c],
      ),
    );
    expect(many.errors?.[0].message).toContain(`the workspace quota is ${MAX_ENTRIES} files and directories, and there are ${MAX_ENTRIES + 1}`);
    const deep = await importRecording(app, recordingOf([{ path: `${'d/'.repeat(MAX_ENTRIES)}f`, hash, size: 1 }], [c]));
    expect(deep.errors?.[0].message).toContain(`the workspace quota is ${MAX_ENTRIES} files and directories`);
  });

  it("a runner's batch naming one held content under many paths is refused, the log unchanged", async () => {
    const c = Buffer.alloc(600_000, 1);
    const hash = sha256(c);
    expect((await importRecording(app, recordingOf([{ path: 'one.bin', hash, size: c.byteLength }], [c]))).errors).toBeUndefined();
    const s = await calledRunnerSession(app);
    const r = await appendEvents(
      app,
      s,
      runnerFileBatch([
        { path: 'a.bin', hash, size: c.byteLength },
        { path: 'b.bin', hash, size: c.byteLength },
      ]),
    );
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(r.errors![0].message).toContain('the workspace quota is 1000000 bytes, and the files come to 1200000');
    expect((await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: s.id })).session.eventCount).toBe(s.eventCount);
  });
});

describe('a tree stored before the quota held at every door', () => {
  it('is not made on disk: the file tool says why', async () => {
    const c = Buffer.alloc(700_000, 3);
    const hash = sha256(c);
    const id = (await importRecording(app, recordingOf([{ path: 'one.bin', hash, size: c.byteLength }], [c]))).data.importRecording.id as string;
    // As an unchecked door once stored it: the change set names the content under a second path (past 1 MB together).
    const client = await app.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL session_replication_role = replica');
      await client.query(
        `UPDATE "Event" SET data = jsonb_set(data, '{changes}', data->'changes' || jsonb_build_array(jsonb_build_object('path', 'two.bin', 'hash', $2::text, 'size', $3::int))) WHERE "sessionId" = $1 AND type = 'plugin/files/change'`,
        [id, hash, c.byteLength],
      );
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await turn(id, '!call list_files {}');
    const [name, status, content] = (await results(id)).at(-1)!;
    expect([name, status]).toEqual(['list_files', 'error']);
    expect(content).toContain('the files of this session cannot be made: the workspace quota is 1000000 bytes, and the files come to 1400000');
    expect(fs.existsSync(path.join(root, id, 'two.bin'))).toBe(false);
  });
});

describe('the quota on what tools leave', () => {
  it('empty directories a command makes count: past the quota, the call is an error and records nothing', async () => {
    const id = await create();
    await turn(id, `!call shell ${JSON.stringify({ command: `i=0; while [ $i -lt ${MAX_ENTRIES + 10} ]; do mkdir d$i; i=$((i+1)); done` })}`);
    const [name, status, content] = (await results(id)).at(-1)!;
    expect([name, status]).toEqual(['shell', 'error']);
    expect(content).toContain(`the workspace quota is ${MAX_ENTRIES} files and directories, and the call left more`);
    expect(await changeSets(id)).toBe(0);
  });

  it('write_file counts the directories of its path', async () => {
    const id = await create();
    await turn(id, write(`${'d/'.repeat(MAX_ENTRIES)}f.txt`, 'x'));
    expect((await results(id)).at(-1)!.slice(0, 2)).toEqual(['write_file', 'error']);
    expect(await changeSets(id)).toBe(0);
  });
});

describe('names a command leaves', () => {
  it('a file name no change set may record (a backslash) makes the call an error: nothing recorded, the turn ends', async () => {
    const id = await create();
    await turn(id, `!call shell ${JSON.stringify({ command: `printf x > 'a\\..\\b'` })}`);
    const [name, status, content] = (await results(id)).at(-1)!;
    expect([name, status]).toEqual(['shell', 'error']);
    expect(content).toContain('cannot be recorded');
    expect(await changeSets(id)).toBe(0);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { status } }`, { id })).session.status).toBe('IDLE');
  });
});

describe("a tenant's workspaces on this process", () => {
  it('share a total: an idle workspace is evicted for another, and made again when next needed', async () => {
    const x = await create();
    const y = await create();
    await turn(x, write('x.txt', 'x'.repeat(1000)));
    expect(fs.existsSync(path.join(root, x, 'x.txt'))).toBe(true);
    await turn(y, write('y.txt', 'y'.repeat(1000)));
    expect((await results(y)).at(-1)!.slice(0, 2)).toEqual(['write_file', 'ok']);
    expect(fs.existsSync(path.join(root, x))).toBe(false);
    await turn(x, '!call read_file {"path":"x.txt"}');
    expect((await results(x)).at(-1)).toEqual(['read_file', 'ok', 'x'.repeat(1000)]);
    expect(fs.existsSync(path.join(root, y))).toBe(false);
    // One workspace past the total is refused, naming the limit.
    const z = await create();
    await turn(z, write('z.txt', 'z'.repeat(TENANT_MAX_BYTES + 1)));
    expect((await results(z)).at(-1)![2]).toContain('FORKLINE_TENANT_WORKSPACES_MAX_BYTES');
  });
});

describe('faults', () => {
  it('deleting a session while its workspace is restored stops the restore and removes the directory (8 runs)', async () => {
    const files = Array.from({ length: 40 }, (_, i) => ({ path: `dir${i % 4}/f${i}.txt`, content: Buffer.from(`file ${i}`) }));
    const recording = recordingOf(
      files.map((f) => ({ path: f.path, hash: sha256(f.content), size: f.content.byteLength })),
      files.map((f) => f.content),
    );
    for (let run = 0; run < 8; run++) {
      const id = (await importRecording(app, recording)).data.importRecording.id as string;
      let restoring!: () => void;
      const reached = new Promise<void>((resolve) => (restoring = resolve));
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      onWrite = async (abs, bytes, file) => {
        if (abs.startsWith(path.join(root, id))) {
          restoring();
          await gate;
        }
        await file.writeFile(bytes);
      };
      await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "!call list_files {}" }) { inputId } }`, { id });
      await reached;
      await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id });
      release();
      await app.services.host.idle();
      onWrite = undefined;
      await waitFor(() => !fs.existsSync(path.join(root, id)), { what: `the directory of deleted session ${id} removed (run ${run})` });
    }
    // Nothing of the deleted sessions is left under the root.
    expect(filesUnder(root).filter((f) => f.includes('dir0/'))).toEqual([]);
  });

  it('a write that fails (a full disk) leaves the old content, and records nothing new', async () => {
    const id = await create();
    await turn(id, write('a.txt', 'old'));
    const before = await changeSets(id);
    onWrite = async (abs, bytes, file) => {
      await file.writeFile(bytes.subarray(0, 2));
      throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    };
    try {
      await turn(id, write('a.txt', 'new content'));
    } finally {
      onWrite = undefined;
    }
    const [name, status, content] = (await results(id)).at(-1)!;
    expect([name, status]).toEqual(['write_file', 'error']);
    expect(content).toContain('could not be written (ENOSPC)');
    expect(await changeSets(id)).toBe(before);
    expect(fs.readFileSync(path.join(root, id, 'a.txt'), 'utf8')).toBe('old');
    expect(filesUnder(path.join(root, id))).toEqual(['a.txt']);
    const file = await app.ok(`query($id: ID!) { session(id: $id) { file(path: "a.txt") { text } } }`, { id });
    expect(file.session.file.text).toBe('old');
  });
});
