// File contents are stored once per tenant, never shared between tenants
// (docs/files.md "Contents are stored once per tenant"). Before, a tenant
// writing a content another tenant held skipped the write (its rows were
// there: ON CONFLICT DO NOTHING), so its request's work, and its time, told
// whether anyone else held exactly that content (a guessed config file with a
// password in it). Now tenant B's write of a content tenant A holds creates
// the same rows as its write of a content nobody holds, deleting either
// tenant's sessions leaves the other's copy readable, and no row is shared.
// The migration gives each tenant holding a content its own copy.
import crypto, { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHUNK_MAX, chunksOf } from '../../src/core/file-chunks.ts';
import { migrate } from '../../src/db/migrate.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createEmptyDatabase } from '../helpers/db.ts';
import { reclaimed } from '../helpers/reclaimed.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { importRecording, recordingOf, sha256 } from './hostile-doors.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTwoTenantApp();
});
afterAll(() => app?.close());

const gqlAs = (who: Record<string, string>) => (query: string, variables?: Record<string, unknown>) => app.gql(query, variables, who);
const count = async (sql: string, params: unknown[] = []) => (await app.db.pool.query<{ n: number }>(sql, params)).rows[0].n;
/** Rows of the three content tables, in all. */
const stored = async () => ({
  blobs: await count('SELECT count(*)::int AS n FROM "FileBlob"'),
  chunks: await count('SELECT count(*)::int AS n FROM "FileChunk"'),
  links: await count('SELECT count(*)::int AS n FROM "FileBlobChunk"'),
});
const minus = (a: Awaited<ReturnType<typeof stored>>, b: Awaited<ReturnType<typeof stored>>) => ({
  blobs: a.blobs - b.blobs,
  chunks: a.chunks - b.chunks,
  links: a.links - b.links,
});
/** The tenants whose copies of `hash` are stored, and of its chunks. */
const copiesOf = async (content: Buffer) => ({
  blob: (await app.db.pool.query<{ tenant: string }>('SELECT tenant FROM "FileBlob" WHERE hash = $1 ORDER BY tenant', [sha256(content)])).rows.map(
    (r) => r.tenant,
  ),
  chunks: (
    await app.db.pool.query<{ tenant: string; n: number }>(
      'SELECT tenant, count(*)::int AS n FROM "FileChunk" WHERE hash = ANY($1::text[]) GROUP BY tenant ORDER BY tenant',
      [chunksOf(content).map((c) => sha256(c))],
    )
  ).rows,
});
const importAs = async (who: Record<string, string>, content: Buffer, name = 'f.bin') => {
  const r = await importRecording(app, recordingOf([{ path: name, hash: sha256(content), size: content.byteLength }], [content]), who);
  expect(r.errors).toBeUndefined();
  return r.data.importRecording.id as string;
};
const deleteAs = (who: Record<string, string>, id: string) => gqlAs(who)(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id });
const readAs = async (who: Record<string, string>, id: string, name = 'f.bin') =>
  (await gqlAs(who)(`query($id: ID!) { session(id: $id) { file(path: "${name}") { hash base64 text } } }`, { id })).data.session.file;

// A small content (one row) and a big one (its chunks), within what a file read hands back.
describe.each([
  ['a small content', 1024],
  ['a chunked content', 3 * CHUNK_MAX],
])('%s', (_, size) => {
  it("tenant B's write of a content tenant A holds creates B's own rows, exactly as its write of a content nobody holds", async () => {
    const [held, fresh] = [randomBytes(size), randomBytes(size)];
    await importAs(A, held);
    const s0 = await stored();
    await importAs(B, held);
    const s1 = await stored();
    await importAs(B, fresh);
    const s2 = await stored();
    // What a write of the content creates when nothing holds it: its blob row, and a big one's chunks and chunk list.
    const rowsOf = (c: Buffer) => {
      const chunks = c.byteLength > CHUNK_MAX ? chunksOf(c).map((x) => sha256(x)) : [];
      return { blobs: 1, chunks: new Set(chunks).size, links: chunks.length };
    };
    expect(minus(s1, s0)).toEqual(rowsOf(held));
    expect(minus(s2, s1)).toEqual(rowsOf(fresh));
    const copies = await copiesOf(held);
    expect(copies.blob).toEqual(['alpha', 'beta']);
    if (size > CHUNK_MAX) expect(copies.chunks.map((c) => c.tenant)).toEqual(['alpha', 'beta']);
  });

  it("deleting all of one tenant's sessions holding it leaves the other's copy readable, each way; the last deletion leaves nothing", async () => {
    const content = randomBytes(size);
    /** After `gone`'s session `id` is deleted and reclaimed, `stays`'s session `kept` reads and exports the content, and only its copy is left. */
    const deletedLeaves = async (gone: Record<string, string>, id: string, stays: Record<string, string>, kept: string, tenant: string) => {
      await deleteAs(gone, id);
      await reclaimed(app);
      expect(Buffer.from((await readAs(stays, kept)).base64, 'base64').equals(content)).toBe(true);
      const recording: string = (await gqlAs(stays)(`query($id: ID!) { session(id: $id) { recording } }`, { id: kept })).data.session.recording;
      const line = recording.split('\n').find((l) => l.startsWith('{"blob"'));
      expect(Buffer.from(JSON.parse(line!).base64, 'base64').equals(content)).toBe(true);
      expect((await copiesOf(content)).blob).toEqual([tenant]);
    };
    const a1 = await importAs(A, content);
    const b1 = await importAs(B, content);
    await deletedLeaves(A, a1, B, b1, 'beta');
    const a2 = await importAs(A, content);
    await deletedLeaves(B, b1, A, a2, 'alpha');

    await deleteAs(A, a2);
    await reclaimed(app);
    expect(await copiesOf(content)).toEqual({ blob: [], chunks: [] });
  });
});

it("an agent's write of a file another tenant's agent wrote stores the writer's own copy", async () => {
  const content = `password=${crypto.randomUUID()}`;
  for (const who of [A, B]) {
    const id = (await gqlAs(who)(`mutation { createSession(input: { title: "config" }) { id } }`)).data.createSession.id;
    await gqlAs(who)(`mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }`, {
      id,
      t: `!call write_file ${JSON.stringify({ path: 'config.ini', content })}`,
    });
    await app.services.host.idle();
    expect((await readAs(who, id, 'config.ini')).text).toBe(content);
  }
  expect(await count('SELECT count(*)::int AS n FROM "FileBlob" WHERE hash = $1', [sha256(content)])).toBe(2);
});

it('within a tenant a content is stored once, however many of its sessions and forks hold it; no row is shared between tenants', async () => {
  const content = randomBytes(2 * CHUNK_MAX);
  const first = await importAs(B, content);
  const before = await stored();
  await importAs(B, content);
  const fork = await gqlAs(B)(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id: first });
  expect(fork.errors).toBeUndefined();
  expect(minus(await stored(), before)).toEqual({ blobs: 0, chunks: 0, links: 0 });
  // Every reference names a row of its own tenant.
  expect(
    await count(
      `SELECT count(*)::int AS n FROM "SessionBlob" sb JOIN "Session" s ON s.id = sb."sessionId" AND s."treeId" = sb."treeId" WHERE s.tenant <> sb.tenant`,
    ),
  ).toBe(0);
  expect(
    await count(
      `SELECT count(*)::int AS n FROM "SessionBlob" sb WHERE NOT EXISTS (SELECT 1 FROM "FileBlob" b WHERE b.tenant = sb.tenant AND b.hash = sb.hash)`,
    ),
  ).toBe(0);
  expect(
    await count(
      `SELECT count(*)::int AS n FROM "FileBlobChunk" l WHERE NOT EXISTS (SELECT 1 FROM "FileChunk" c WHERE c.tenant = l.tenant AND c.hash = l."chunkHash")`,
    ),
  ).toBe(0);
});

describe('the migration of contents shared between tenants', () => {
  const MIGRATIONS = path.resolve(import.meta.dirname, '../../prisma/migrations');
  const THIS = '2026122902_blobs_per_tenant';
  let url: string;
  let migrated: TestApp;
  let db: pg.Client;
  const small = Buffer.from('held by alpha and beta');
  const big = randomBytes(3 * CHUNK_MAX);
  const alphaOnly = Buffer.from('held by alpha alone');
  const orphan = randomBytes(2 * CHUNK_MAX);

  beforeAll(async () => {
    url = await createEmptyDatabase('t_blobmig');
    // The database as the release before left it: every migration before this one.
    const before = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-blobmig-'));
    fs.copyFileSync(path.join(MIGRATIONS, 'migration_lock.toml'), path.join(before, 'migration_lock.toml'));
    for (const m of fs.readdirSync(MIGRATIONS).filter((m) => m < THIS && fs.statSync(path.join(MIGRATIONS, m)).isDirectory()))
      fs.cpSync(path.join(MIGRATIONS, m), path.join(before, m), { recursive: true });
    await migrate(url, before);
    fs.rmSync(before, { recursive: true, force: true });
    db = new pg.Client(pgConfigFromUrl(url));
    await db.connect();
    for (const [id, tenant] of [
      ['ses_a', 'alpha'],
      ['ses_b', 'beta'],
    ]) {
      await db.query(`INSERT INTO "SessionTree" (id, "treeId") VALUES ($1, $1)`, [id]);
      await db.query(`INSERT INTO "Session" (id, "treeId", tenant) VALUES ($1, $1, $2)`, [id, tenant]);
    }
    // The old form: each content once, whoever holds it; a big one as its chunks.
    const putOld = async (content: Buffer) => {
      const hash = sha256(content);
      if (content.byteLength <= CHUNK_MAX)
        return db.query(`INSERT INTO "FileBlob" (hash, size, content) VALUES ($1, $2, $3)`, [hash, content.byteLength, content]);
      await db.query(`INSERT INTO "FileBlob" (hash, size) VALUES ($1, $2)`, [hash, content.byteLength]);
      for (const [idx, c] of chunksOf(content).entries()) {
        await db.query(`INSERT INTO "FileChunk" (hash, size, content) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [sha256(c), c.byteLength, c]);
        await db.query(`INSERT INTO "FileBlobChunk" ("blobHash", idx, "chunkHash") VALUES ($1, $2, $3)`, [hash, idx, sha256(c)]);
      }
    };
    for (const c of [small, big, alphaOnly, orphan]) await putOld(c);
    const hold = (id: string, tenant: string, c: Buffer) =>
      db.query(`INSERT INTO "SessionBlob" ("sessionId", "treeId", hash, tenant) VALUES ($1, $1, $2, $3)`, [id, sha256(c), tenant]);
    await hold('ses_a', 'alpha', small);
    await hold('ses_b', 'beta', small);
    await hold('ses_a', 'alpha', big);
    await hold('ses_b', 'beta', big);
    await hold('ses_a', 'alpha', alphaOnly);
    await migrate(url);
    migrated = await startTestApp({ databaseUrl: url });
  });
  afterAll(async () => {
    await migrated?.close();
    await db?.end();
  });

  it('gives each tenant holding a content its own copy, chunks and chunk list; a content nobody holds goes', async () => {
    const tenantsOf = async (table: string, col: string, hashes: string[]) =>
      (await db.query<{ tenant: string }>(`SELECT tenant FROM "${table}" WHERE "${col}" = ANY($1::text[]) ORDER BY tenant`, [hashes])).rows.map(
        (r) => r.tenant,
      );
    const chunkHashes = (c: Buffer) => [...new Set(chunksOf(c).map((x) => sha256(x)))];
    expect(await tenantsOf('FileBlob', 'hash', [sha256(small)])).toEqual(['alpha', 'beta']);
    expect(await tenantsOf('FileBlob', 'hash', [sha256(big)])).toEqual(['alpha', 'beta']);
    expect(await tenantsOf('FileBlob', 'hash', [sha256(alphaOnly)])).toEqual(['alpha']);
    expect(await tenantsOf('FileBlob', 'hash', [sha256(orphan)])).toEqual([]);
    const n = chunkHashes(big).length;
    expect(await tenantsOf('FileChunk', 'hash', chunkHashes(big))).toEqual([...Array(n).fill('alpha'), ...Array(n).fill('beta')]);
    expect(await tenantsOf('FileBlobChunk', 'blobHash', [sha256(big)])).toEqual([...Array(n).fill('alpha'), ...Array(n).fill('beta')]);
    expect(await tenantsOf('FileChunk', 'hash', chunkHashes(orphan))).toEqual([]);
    for (const tenant of ['alpha', 'beta']) {
      const read = await migrated.services.store.files.contents(tenant, [sha256(small), sha256(big)]);
      expect(read.get(sha256(small))!.equals(small)).toBe(true);
      expect(read.get(sha256(big))!.equals(big)).toBe(true);
    }
  });

  it("deleting one tenant's session then reclaims only its copies", async () => {
    await migrated.services.store.deleteSession({ tenant: 'alpha' }, 'ses_a');
    await reclaimed(migrated);
    const { rows } = await db.query<{ tenant: string }>('SELECT DISTINCT tenant FROM "FileBlob" UNION SELECT DISTINCT tenant FROM "FileChunk"');
    expect(rows.map((r) => r.tenant)).toEqual(['beta']);
    const read = await migrated.services.store.files.contents('beta', [sha256(small), sha256(big)]);
    expect(read.get(sha256(big))!.equals(big)).toBe(true);
    expect(read.size).toBe(2);
  });
});
