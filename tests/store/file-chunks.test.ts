// Big files stored as chunks (core/file-chunks.ts, store/file-blobs.ts):
// a one-byte change to a big file stores a chunk or two, not the file again;
// the contents read back exactly in the store, through GraphQL's Session.file
// and fileChanges (its kind), in a fork's restored directory, and across export, delete
// and import; deleting the last session holding them deletes their chunks.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileWorkspaces } from '../../src/agent/file-workspace.ts';
import { CHUNK_MAX, isChunked } from '../../src/core/file-chunks.ts';
import { sha256 } from '../../src/store/file-blobs.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { reclaimed } from '../helpers/reclaimed.ts';
import { bigText, fileCallEvents } from '../helpers/file-calls.ts';

let app: TestApp;
let root: string;
const scope = { tenant: 'local' };
beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'file-chunks-test-'));
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const stored = async () => {
  const { rows } = await app.db.pool.query(
    `SELECT (SELECT count(*) FROM "FileChunk")::int AS chunks, (SELECT coalesce(sum(size), 0) FROM "FileChunk")::int AS "chunkBytes",
            (SELECT coalesce(sum(octet_length(content)), 0) FROM "FileBlob")::int AS "wholeBytes"`,
  );
  return rows[0] as { chunks: number; chunkBytes: number; wholeBytes: number };
};
const blob = (text: string) => {
  const content = Buffer.from(text);
  return { hash: sha256(content), content, size: content.byteLength };
};
const FILE = `query($id: ID!, $p: String!, $a: Int) { session(id: $id) { file(path: $p, atSeq: $a) { size hash text } } }`;

describe('a big file', () => {
  it('changed by one byte stores about one chunk more, and each version reads back exactly (store, Session.file, fileChanges)', async () => {
    const v1 = blob(bigText(900 * 1024, 'one'));
    const mid = v1.content.indexOf('\n', 450 * 1024) + 1;
    const v2 = blob(v1.content.toString().slice(0, mid) + 'X' + v1.content.toString().slice(mid + 1));
    expect(isChunked(v1.size)).toBe(true);
    expect(v2.size).toBe(v1.size);

    const { id } = await app.services.store.createSession(scope, { title: 'big file' });
    const empty = await stored();
    await app.services.store.files.put(id, [v1]);
    await app.services.store.append(id, fileCallEvents(1, [{ path: 'big.txt', hash: v1.hash, size: v1.size }]));
    const one = await stored();
    // Stored as chunks, not whole.
    expect(one.wholeBytes).toBe(empty.wholeBytes);
    expect(one.chunkBytes - empty.chunkBytes).toBe(v1.size);
    expect(one.chunks - empty.chunks).toBeGreaterThan(2);

    await app.services.store.files.put(id, [v2]);
    await app.services.store.append(id, fileCallEvents(2, [{ path: 'big.txt', hash: v2.hash, size: v2.size }]));
    const two = await stored();
    expect(two.chunks - one.chunks).toBeGreaterThanOrEqual(1);
    expect(two.chunks - one.chunks).toBeLessThanOrEqual(2);
    expect(two.chunkBytes - one.chunkBytes).toBeLessThanOrEqual(2 * CHUNK_MAX);
    expect(two.chunkBytes - one.chunkBytes).toBeLessThan(v2.size / 2);

    // Store level.
    const contents = await app.services.store.files.contents(scope.tenant, [v1.hash, v2.hash]);
    expect(contents.get(v1.hash)!.equals(v1.content)).toBe(true);
    expect(contents.get(v2.hash)!.equals(v2.content)).toBe(true);

    // Through GraphQL, at each version's seq.
    const events = await app.services.store.log.page(id, -1, 100);
    const [r1] = events.filter((e) => e.type === 'tool/result').map((e) => e.seq);
    expect(await app.ok(FILE, { id, p: 'big.txt', a: r1 })).toEqual({ session: { file: { size: v1.size, hash: v1.hash, text: v1.content.toString() } } });
    expect(await app.ok(FILE, { id, p: 'big.txt' })).toEqual({ session: { file: { size: v2.size, hash: v2.hash, text: v2.content.toString() } } });
    const { fileChanges } = (await app.ok(`query($id: ID!, $f: Int!) { session(id: $id) { fileChanges(fromSeq: $f) { path kind diff } } }`, { id, f: r1 }))
      .session;
    expect(fileChanges).toHaveLength(1);
    // Past DIFF_MAX_BYTES a change has no diff (docs/files.md); its kind still says CHANGED.
    expect(fileChanges[0]).toEqual({ path: 'big.txt', kind: 'CHANGED', diff: null });

    // A fork's directory is made with the big file as of its cut.
    const child = (await app.services.store.fork(scope, id, r1)).session;
    const workspaces = new FileWorkspaces(root, app.services.store.files, app.services.store.log);
    const dir = await workspaces.of(child.id).ready();
    expect(fs.readFileSync(path.join(dir, 'big.txt')).equals(v1.content)).toBe(true);
  });

  it('a recording carries it whole; exported, deleted (its chunks with it) and imported, it reads the same', async () => {
    const v = blob(bigText(700 * 1024, 'recorded'));
    const { id } = await app.services.store.createSession(scope, { title: 'recorded' });
    await app.services.store.files.put(id, [v]);
    await app.services.store.append(id, fileCallEvents(1, [{ path: 'docs/big.md', hash: v.hash, size: v.size }]));
    const recording: string = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id })).session.recording;
    const lines = recording
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.blob)).toEqual([{ blob: v.hash, base64: v.content.toString('base64') }]);

    const chunksOf = async (hash: string) =>
      (
        await app.db.pool.query(
          'SELECT count(*)::int AS n FROM "FileChunk" c WHERE c.hash IN (SELECT "chunkHash" FROM "FileBlobChunk" WHERE "blobHash" = $1)',
          [hash],
        )
      ).rows[0].n;
    const before = await stored();
    expect(await chunksOf(v.hash)).toBeGreaterThan(2);
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id });
    await reclaimed(app);
    const after = await stored();
    expect(after.chunkBytes).toBe(before.chunkBytes - v.size);
    expect((await app.db.pool.query('SELECT count(*)::int AS n FROM "FileBlob" WHERE hash = $1', [v.hash])).rows[0].n).toBe(0);

    const copy = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording })).importRecording.id;
    expect((await stored()).chunkBytes).toBe(before.chunkBytes);
    expect(await app.ok(FILE, { id: copy, p: 'docs/big.md' })).toEqual({ session: { file: { size: v.size, hash: v.hash, text: v.content.toString() } } });
  });

  it('a chunk two files share stays while either holds it', async () => {
    const shared = bigText(600 * 1024, 'shared');
    const a = blob(shared + 'tail a\n');
    const b = blob(shared + 'tail b\n');
    const s1 = (await app.services.store.createSession(scope, { title: 'a' })).id;
    const s2 = (await app.services.store.createSession(scope, { title: 'b' })).id;
    await app.services.store.files.put(s1, [a]);
    await app.services.store.append(s1, fileCallEvents(1, [{ path: 'f', hash: a.hash, size: a.size }]));
    await app.services.store.files.put(s2, [b]);
    await app.services.store.append(s2, fileCallEvents(1, [{ path: 'f', hash: b.hash, size: b.size }]));
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: s1 });
    await reclaimed(app);
    expect((await app.services.store.files.contents(scope.tenant, [b.hash])).get(b.hash)!.equals(b.content)).toBe(true);
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: s2 });
    await reclaimed(app);
    expect((await app.services.store.files.contents(scope.tenant, [a.hash, b.hash])).size).toBe(0);
  });
});

describe('one put of many contents', () => {
  it('stores each byte-exact: empty, every byte value, chunked with a repeated chunk, one named twice, one stored before', async () => {
    const id = (await app.services.store.createSession(scope, { title: 'one put' })).id;
    const all = Buffer.from(Array.from({ length: 4 * 256 }, (_, i) => i % 256)); // NUL, backslash, quotes, 0xff
    const repeated = Buffer.alloc(3 * CHUNK_MAX, 7); // one chunk's bytes again and again
    const mixed = Buffer.concat([all, Buffer.from(bigText(2 * CHUNK_MAX, 'mixed')), all]);
    const before = { content: Buffer.from('stored before') };
    await app.services.store.files.put(id, [{ hash: sha256(before.content), ...before }]);
    const contents = [Buffer.alloc(0), all, repeated, mixed, before.content, all];
    expect(contents.filter((c) => isChunked(c.byteLength))).toHaveLength(2);
    await app.services.store.files.put(
      id,
      contents.map((content) => ({ hash: sha256(content), content })),
    );
    const read = await app.services.store.files.contents(scope.tenant, contents.map(sha256));
    expect(read.size).toBe(5);
    for (const c of contents) expect(Buffer.compare(read.get(sha256(c))!, c), `${c.byteLength} bytes`).toBe(0);
    expect(await app.services.store.files.storedSizes(scope.tenant, contents.map(sha256))).toEqual(new Map(contents.map((c) => [sha256(c), c.byteLength])));
  });
});
