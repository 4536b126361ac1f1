// Existing databases (issue: copy-free forks): a database in the previous form —
// every fork a full copy of its parent's prefix — is migrated by the real
// `prisma migrate deploy`. Afterwards every session reads and exports exactly
// as before, verified copies are shared instead of copied, a copy that differs
// from its parent keeps its rows, and the service works on the result.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { buildForkSeed } from '../../src/core/fork-seed.ts';
import { recordingHeader, recordingLine } from '../../src/core/recording.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createEmptyDatabase } from '../helpers/db.ts';
import { openAtCut, REFERENCE_LOG, withSeqs } from '../spec/reference-log.ts';
import type { LogEvent } from '../../src/core/events.ts';

const MIGRATIONS = path.resolve(import.meta.dirname, '../../prisma/migrations');
const BEFORE = ['20261130000000_init', '20261130010000_pending_inputs'];

let databaseUrl: string;
let app: TestApp;
let db: pg.Client;
/** Each session's log as the previous code read it: its own rows, in seq order. */
const oldReads = new Map<string, Array<{ seq: number; type: string; data: unknown; inherited: boolean; synthetic: boolean; createdAt: string }>>();
const oldExports = new Map<string, string>();

const t0 = Date.parse('2026-11-01T10:00:00Z');
async function insertRows(sessionId: string, events: Array<LogEvent & { inherited?: boolean; synthetic?: boolean; createdAt?: string }>) {
  for (const e of events) {
    await db.query(`INSERT INTO "Event" (id, "sessionId", seq, type, data, inherited, synthetic, "createdAt") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, [
      `evt_${crypto.randomUUID().replace(/-/g, '')}`,
      sessionId,
      e.seq,
      e.type,
      JSON.stringify(e.data),
      e.inherited ?? false,
      e.synthetic ?? false,
      e.createdAt ?? new Date(t0 + e.seq * 1000).toISOString(),
    ]);
  }
}
async function insertSession(id: string, fields: Record<string, unknown>) {
  const cols = Object.keys(fields);
  await db.query(`INSERT INTO "Session" (id, ${cols.map((c) => `"${c}"`).join(', ')}) VALUES ($1, ${cols.map((_, i) => `$${i + 2}`).join(', ')})`, [
    id,
    ...Object.values(fields),
  ]);
}
/** A fork exactly as the previous code made it: the prefix copied row by row, then the marker and closers. */
async function copyFork(child: string, parent: string, cut: number, own: LogEvent[] = []) {
  const prefix = (
    await db.query(`SELECT seq, type, data, synthetic, "createdAt" FROM "Event" WHERE "sessionId" = $1 AND seq <= $2 ORDER BY seq`, [parent, cut])
  ).rows;
  const seed = buildForkSeed({ parentSessionId: parent, cutSeq: cut, openTail: openAtCut(prefix as LogEvent[], cut), effectOf: toolEffectOf });
  const rest = [...seed.events, ...own.map((e, i) => ({ ...e, seq: seed.firstLiveSeq + i }))];
  await insertSession(child, {
    parentId: parent,
    forkedAtSeq: cut,
    inheritedEventCount: cut + 1,
    firstLiveSeq: seed.firstLiveSeq,
    eventCount: seed.firstLiveSeq + own.length,
    turnCount: 0,
  });
  await insertRows(
    child,
    prefix.map((e) => ({ ...e, createdAt: e.createdAt.toISOString(), inherited: true })),
  );
  await insertRows(
    child,
    rest.map((e) => ({ ...e, createdAt: new Date(t0 + 100_000 + e.seq).toISOString() })),
  );
}

beforeAll(async () => {
  databaseUrl = await createEmptyDatabase('t_mig');
  db = new pg.Client(pgConfigFromUrl(databaseUrl));
  await db.connect();
  // The database as the previous release left it: its migrations applied and recorded.
  await db.query(`CREATE TABLE "_prisma_migrations" ("id" VARCHAR(36) PRIMARY KEY NOT NULL, "checksum" VARCHAR(64) NOT NULL, "finished_at" TIMESTAMPTZ,
    "migration_name" VARCHAR(255) NOT NULL, "logs" TEXT, "rolled_back_at" TIMESTAMPTZ, "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(), "applied_steps_count" INTEGER NOT NULL DEFAULT 0)`);
  for (const m of BEFORE) {
    const sql = fs.readFileSync(path.join(MIGRATIONS, m, 'migration.sql'), 'utf8');
    await db.query(sql);
    await db.query(`INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, applied_steps_count) VALUES ($1, $2, now(), $3, 1)`, [
      crypto.randomUUID(),
      crypto.createHash('sha256').update(sql).digest('hex'),
      m,
    ]);
  }
  // root; a = root@10 (mid-step); b = a@20 (in a's own part); c = b@12 (in b's copy of a's copy of root); t: a copy edited by hand.
  await insertSession('ses_root', { title: 'root', eventCount: REFERENCE_LOG.length, turnCount: 2, pendingInputCount: 0 });
  await insertRows('ses_root', withSeqs(REFERENCE_LOG));
  await copyFork('ses_a', 'ses_root', 10, [
    { seq: 0, type: 'plugin/old/own', data: { n: 1 } },
    { seq: 0, type: 'plugin/old/own', data: { n: 2 } },
  ]);
  await copyFork('ses_b', 'ses_a', 18, [{ seq: 0, type: 'session/title', data: { title: 'b' } }]);
  await copyFork('ses_c', 'ses_b', 12);
  await copyFork('ses_t', 'ses_root', 5);
  await db.query(`ALTER TABLE "Event" DISABLE TRIGGER "Event_immutable"`);
  await db.query(`UPDATE "Event" SET data = '{"title": "edited by hand"}' WHERE "sessionId" = 'ses_t' AND seq = 0`);
  await db.query(`ALTER TABLE "Event" ENABLE TRIGGER "Event_immutable"`);
  for (const id of ['ses_root', 'ses_a', 'ses_b', 'ses_c', 'ses_t']) {
    const rows = (await db.query(`SELECT seq, type, data, inherited, synthetic, "createdAt" FROM "Event" WHERE "sessionId" = $1 ORDER BY seq`, [id])).rows;
    const title = (await db.query(`SELECT title FROM "Session" WHERE id = $1`, [id])).rows[0].title;
    oldReads.set(
      id,
      rows.map((r) => ({ ...r, createdAt: r.createdAt.toISOString() })),
    );
    oldExports.set(id, [recordingHeader({ id, title }), ...rows.map((r) => JSON.parse(recordingLine(r)))].map((x) => JSON.stringify(x)).join('\n') + '\n');
  }

  await migrate(databaseUrl);
  app = await startTestApp({ databaseUrl });
});
afterAll(async () => {
  await app?.close();
  await db?.end();
});

const EVENTS = `query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { seq type data inherited synthetic createdAt } } } } }`;

describe('migrating a database of copied forks', () => {
  it('records the migration like any other', async () => {
    const { rows } = await db.query(`SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL ORDER BY migration_name`);
    expect(rows.map((r) => r.migration_name)).toEqual(
      fs
        .readdirSync(MIGRATIONS)
        .filter((d) => /^\d/.test(d))
        .sort(),
    );
  });

  it('every session reads and exports exactly as before', async () => {
    for (const [id, before] of oldReads) {
      const { session } = await app.ok(EVENTS, { id });
      expect(
        session.events.edges.map((e: any) => e.node),
        id,
      ).toEqual(before);
      const { session: s } = await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id });
      expect(s.recording, id).toBe(oldExports.get(id));
    }
  });

  it('verified copies now share their prefix; the hand-edited copy keeps its rows', async () => {
    const { rows } = await db.query(
      `SELECT s.id, s."treeId", s."inheritedRanges", (SELECT count(*)::int FROM "Event" e WHERE e."sessionId" = s.id) AS own FROM "Session" s ORDER BY id`,
    );
    const byId = Object.fromEntries(rows.map((r) => [r.id, r]));
    expect(byId.ses_a.inheritedRanges).toEqual([{ sessionId: 'ses_root', fromSeq: 0, toSeq: 10 }]);
    expect(byId.ses_b.inheritedRanges).toEqual([
      { sessionId: 'ses_root', fromSeq: 0, toSeq: 10 },
      { sessionId: 'ses_a', fromSeq: 11, toSeq: 18 },
    ]);
    expect(byId.ses_c.inheritedRanges).toEqual([
      { sessionId: 'ses_root', fromSeq: 0, toSeq: 10 },
      { sessionId: 'ses_a', fromSeq: 11, toSeq: 12 },
    ]);
    expect(byId.ses_t.inheritedRanges).toEqual([]);
    for (const id of ['ses_a', 'ses_b', 'ses_c']) expect(byId[id].own, id).toBe(oldReads.get(id)!.filter((e) => !e.inherited).length);
    expect(byId.ses_t.own).toBe(oldReads.get('ses_t')!.length);
    expect(new Set(rows.map((r) => r.treeId))).toEqual(new Set(['ses_root']));
    // Each existing session is in the directory of trees, under its tree (sessions are found by id there).
    const directory = await db.query(`SELECT id, "treeId" FROM "SessionTree" ORDER BY id`);
    expect(directory.rows).toEqual(rows.map((r) => ({ id: r.id, treeId: r.treeId })));
    // The running pending-input count came along: in_2 is queued at seq 13..21 of the root.
    const pending = await db.query(`SELECT seq, "pendingInputCount" AS n FROM "Event" WHERE "sessionId" = 'ses_root' AND seq IN (12, 13, 21, 22) ORDER BY seq`);
    expect(pending.rows.map((r) => r.n)).toEqual([0, 1, 1, 0]);
  });

  it('existing events are searchable: each matches once, where it is stored, counting the forks sharing it', async () => {
    const { searchSessions } = await app.ok(`{ searchSessions(query: "first question") { edges { node { kind seq descendants session { id } } } } }`);
    const hits = searchSessions.edges.map((e: any) => [e.node.session.id, e.node.kind, e.node.seq, e.node.descendants]);
    // ses_a, ses_b and ses_c share the root's seq 2; ses_t kept its own (edited) copy of it.
    expect(hits.sort()).toEqual([
      ['ses_root', 'INPUT', 2, 3],
      ['ses_t', 'INPUT', 2, 0],
    ]);
  });

  it('the service works on the migrated data: fork, continue, delete', async () => {
    const f = await app.ok(`mutation { forkSession(input: { sessionId: "ses_c", atSeq: 5 }) { session { id inheritedEventCount } syntheticEvents { type } } }`);
    expect(f.forkSession.session.inheritedEventCount).toBe(6);
    await app.ok(`mutation { sendMessage(input: { sessionId: "ses_b", text: "after the upgrade" }) { inputId } }`);
    await app.services.host.idle();
    const { session } = await app.ok(`{ session(id: "ses_b") { turns { turn reason } } }`);
    expect(session.turns.at(-1)).toEqual({ turn: 2, reason: 'completed' });
    const del = await app.gql(`mutation { deleteSession(id: "ses_a") { deletedSessionIds } }`);
    expect(del.errors?.[0].extensions?.code).toBe('SESSION_HAS_CHILDREN');
  });
});
