// Contents checked again where a tree is made on disk and where they are
// served (docs/files.md "Where the files live"): a restore writes each file
// only as the bytes its sha-256 names, with the size the log says, a page of
// contents at a time; a row rewritten since it was stored, a chunk list that
// lost a chunk, a content gone or a change set whose size lies (a row an
// unchecked door once stored) refuses the restore naming the file, and no
// part of the tree is left on disk. Session.file and the export refuse such
// a content too. A tree as deep and wide as the quota allows costs what its
// entries do, at the door and at the restore. (Paths at the restore:
// hostile-files.test.ts; symlinks and FIFOs a command leaves:
// hostile-workspace.test.ts.)
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileWorkspaces } from '../../src/agent/file-workspace.ts';
import { FileBlobs, sha256 } from '../../src/store/file-blobs.ts';
import { isChunked } from '../../src/core/file-chunks.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { spent } from '../helpers/event-loop.ts';
import { bigText, fileCallEvents } from '../helpers/file-calls.ts';
import { postRecording, recordingOf } from './hostile-doors.ts';

const MAX_BYTES = 1_000_000;

let base: string;
let app: TestApp;
const scope = { tenant: 'local' };
beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-restores-'));
  app = await startTestApp({ workspacesDir: path.join(base, 'workspaces'), workspaceLimits: { maxBytes: MAX_BYTES } });
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(base, { recursive: true, force: true });
});

const turns = agentTurns(() => app, 'hostile restores');
const blob = (content: Buffer | string) => {
  const bytes = Buffer.from(content);
  return { hash: sha256(bytes), content: bytes, size: bytes.byteLength };
};

/** A session whose one call wrote `files`, their contents stored as the agent stores them. */
async function sessionWith(files: Record<string, ReturnType<typeof blob>>): Promise<string> {
  const { id } = await app.services.store.createSession(scope, { title: 'hostile restores' });
  await app.services.store.files.put(id, Object.values(files));
  await app.services.store.append(
    id,
    fileCallEvents(
      1,
      Object.entries(files).map(([p, b]) => ({ path: p, hash: b.hash, size: b.size })),
    ),
  );
  return id;
}

/** Runs `sql` as the database's owner would, past the triggers that keep events immutable (a replica's role). */
async function asReplica(sql: string, params: unknown[]): Promise<number> {
  const client = await app.db.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SET LOCAL session_replication_role = replica`);
    const { rowCount } = await client.query(sql, params);
    await client.query('COMMIT');
    return rowCount ?? 0;
  } finally {
    client.release();
  }
}

/** A fork of `id` at its end, whose first file tool (list_files) makes its directory: that call's [status, content]. */
async function forkAndList(id: string): Promise<{ child: string; result: unknown[] }> {
  const child = (await app.services.store.fork(scope, id, undefined)).session.id;
  await turns.turn(child, '!call list_files {}');
  const [, status, content] = (await turns.results(child)).at(-1)!;
  return { child, result: [status, content] };
}

/** Regular files under the fork's workspace directory: none when no tree was made. */
function onDisk(sessionId: string): string[] {
  const dir = path.join(base, 'workspaces', sessionId);
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((p) => fs.statSync(path.join(dir, p)).isFile()).sort();
}

const FILE = `query($id: ID!, $p: String!) { session(id: $id) { file(path: $p) { size hash text } } }`;

describe('a stored content that is no longer what its hash names', () => {
  it('(its row rewritten, same size) refuses the restore naming the file, leaves nothing on disk, and is not served by Session.file or an export', async () => {
    const a = blob('first file\n');
    const b = blob('the real b\n');
    const c = blob('third file\n');
    const id = await sessionWith({ 'a.txt': a, 'dir/b.txt': b, 'c.txt': c });
    const forged = Buffer.from('<script>1!\n');
    expect(forged.byteLength).toBe(b.size);
    expect(await asReplica(`UPDATE "FileBlob" SET content = $2 WHERE hash = $1`, [b.hash, forged])).toBe(1);

    const { child, result } = await forkAndList(id);
    expect(result).toEqual([
      'error',
      `the files of this session cannot be made: the content of "dir/b.txt" (${b.hash}) does not match its hash (its ${b.size} bytes hash to ${sha256(forged)})`,
    ]);
    expect(onDisk(child)).toEqual([]);

    // Served nowhere as that file: not by Session.file, not in a recording.
    const read = await app.gql(FILE, { id, p: 'dir/b.txt' });
    expect(read.errors).toHaveLength(1);
    expect(JSON.stringify(read)).not.toContain('<script>');
    expect(await app.ok(FILE, { id, p: 'a.txt' })).toEqual({ session: { file: { size: a.size, hash: a.hash, text: 'first file\n' } } });
    const recording = await app.gql(`query($id: ID!) { session(id: $id) { recording } }`, { id });
    expect(recording.errors).toHaveLength(1);
    expect(JSON.stringify(recording)).not.toContain(forged.toString('base64'));
  });

  it('(a big one whose chunk list lost a chunk) refuses the restore naming the file; nothing on disk', async () => {
    const big = blob(bigText(600 * 1024, 'chunked'));
    expect(isChunked(big.size)).toBe(true);
    const id = await sessionWith({ 'small.txt': blob('small\n'), 'big.txt': big });
    expect(await asReplica(`DELETE FROM "FileBlobChunk" WHERE "blobHash" = $1 AND idx = 1`, [big.hash])).toBe(1);

    const { child, result } = await forkAndList(id);
    expect(result[0]).toBe('error');
    expect(result[1]).toMatch(
      new RegExp(
        `^the files of this session cannot be made: the content of "big.txt" \\(${big.hash}\\) does not match its hash \\(its \\d+ bytes hash to [0-9a-f]{64}\\)$`,
      ),
    );
    expect(onDisk(child)).toEqual([]);
  });
});

describe('a content missing at the restore', () => {
  it('refuses it before anything is written, naming the file; nothing on disk', async () => {
    const files = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${String(i).padStart(2, '0')}.txt`, blob(`file ${i}\n`)]));
    const gone = files['f20.txt'];
    const id = await sessionWith(files);
    await asReplica(`DELETE FROM "SessionBlob" WHERE hash = $1`, [gone.hash]);
    expect(await asReplica(`DELETE FROM "FileBlob" WHERE hash = $1`, [gone.hash])).toBe(1);

    const { child, result } = await forkAndList(id);
    expect(result).toEqual(['error', `the files of this session cannot be made: the content of "f20.txt" (${gone.hash}) is missing`]);
    expect(onDisk(child)).toEqual([]);
  });
});

describe('a change set whose size lies (stored before the door checked sizes)', () => {
  it('refuses the restore instead of writing past the quota', async () => {
    const big = blob(Buffer.alloc(MAX_BYTES + 1, 'x'));
    const { id } = await app.services.store.createSession(scope, { title: 'size lie' });
    await app.services.store.files.put(id, [big]);
    await app.services.store.append(id, fileCallEvents(1, [{ path: 'big.txt', hash: big.hash, size: 1 }]));
    // The log's claim: 1 byte, well within the quota. Its content: past it.
    const { child, result } = await forkAndList(id);
    expect(result).toEqual(['error', `the files of this session cannot be made: the log says "big.txt" has 1 bytes, but its content has ${big.size}`]);
    expect(onDisk(child)).toEqual([]);
  });
});

describe('a restore of big files', () => {
  it('reads their contents a page at a time, not the whole tree at once, and writes each exactly', async () => {
    /** The store the workspaces read through, noting the most bytes of contents one read returned. */
    class Watched extends FileBlobs {
      largest = 0;
      override async contents(tenant: string, hashes: Iterable<string>, db?: Parameters<FileBlobs['contents']>[2]) {
        const out = await super.contents(tenant, hashes, db);
        this.largest = Math.max(
          this.largest,
          [...out.values()].reduce((n, c) => n + c.byteLength, 0),
        );
        return out;
      }
    }
    const limits = { maxBytes: 100 * 1024 * 1024, maxFiles: 100, maxFileBytes: 10 * 1024 * 1024 };
    const files = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`big/${i}.bin`, blob(randomBytes(6 * 1024 * 1024))]));
    const { id } = await app.services.store.createSession(scope, { title: 'big restore' });
    for (const b of Object.values(files)) await app.services.store.files.put(id, [b]);
    await app.services.store.append(
      id,
      fileCallEvents(
        1,
        Object.entries(files).map(([p, b]) => ({ path: p, hash: b.hash, size: b.size })),
      ),
    );

    const watched = new Watched(app.db.pool, app.services.store.log, { ...limits, maxNamedHashes: 100 });
    const root = path.join(base, 'big');
    const dir = await new FileWorkspaces(root, watched, app.services.store.log, limits).of(id).ready();
    for (const [p, b] of Object.entries(files)) expect(fs.readFileSync(path.join(dir, p)).equals(b.content)).toBe(true);
    // 30 MiB of files, read 16 MiB at most at a time (two 6 MiB files a page).
    expect(watched.largest).toBeGreaterThan(0);
    expect(watched.largest).toBeLessThanOrEqual(16 * 1024 * 1024);
  });
});

describe('a tree as deep and wide as the quota lets it be (9,750 files in their own directories 500 deep)', () => {
  it('is imported and restored holding the event loop briefly, each directory opened once', async () => {
    // 500 directories in a chain, then one directory per file: 500 + 9,750 + 9,750 entries, the quota's 20,000; paths of 1,006 characters at most.
    const chain = 'd/'.repeat(500);
    const empty = Buffer.alloc(0);
    const files = Array.from({ length: 9750 }, (_, i) => ({ path: `${chain}${i}/f`, hash: sha256(empty), size: 0 }));
    const imported = await spent(() => postRecording(app, recordingOf(files, [empty])));
    expect(imported.result.status).toBe(201);
    const id = imported.result.body.session.id as string;

    // Every file and directory the restore opens goes through node:fs/promises' open (workspace-handles.ts): counted.
    const open = fsp.open;
    let opens = 0;
    fsp.open = ((...args: Parameters<typeof open>) => (opens++, open(...args))) as typeof open;
    const restored = await spent(() => turns.turn(id, '!call list_files {}')).finally(() => (fsp.open = open));
    const [, status, content] = (await turns.results(id)).at(-1)!;
    expect(status).toBe('ok');
    expect(content).toContain(`${chain}0/f (0 bytes)`);
    expect(fs.readdirSync(path.join(base, 'workspaces', id, chain))).toHaveLength(9750);
    // Before, the restore opened each file's directory from the root: 500 opens a file, 5 million for this tree. Now each
    // directory on the way is opened once, then each file's directory and the file itself: about 30,000.
    console.log(
      `a tree of 9,750 files 500 deep: imported (loop held ${Math.round(imported.stallMs)} ms), restored with ${opens} opens in ${Math.round(restored.ms)} ms (loop held ${Math.round(restored.stallMs)} ms)`,
    );
    expect(opens).toBeGreaterThanOrEqual(9750);
    expect(opens).toBeLessThan(100_000);
    // Before, each directory counted every file below it (5 million updates for this tree: 8 to 17 s of CPU at a stretch
    // at the door and again at the restore; the count itself: tests/core/file-tree.test.ts). On a loaded 2-core machine
    // the loop is held 1.3 s at the door and 1.9 s at the restore: the bounds allow about eight times that.
    expect(imported.stallMs).toBeLessThan(15_000);
    expect(restored.stallMs).toBeLessThan(15_000);
  }, 300_000);
});
