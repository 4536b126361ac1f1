// Behind a real PgBouncer in transaction mode, once before protocol-level
// prepared statements (Debian 12's 1.18, prepared statements off) and once with
// them (1.24.1 built from source, forkline's named statements on): the start
// checks its own database through the pooler, migrations and LISTEN take the
// direct URL, and two processes share the pooler's few server connections.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, pgServerUrl } from '../helpers/db.ts';
import { sampleBackends, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { expectedMigrations } from '../../src/db/migrate.ts';

const POOL_SIZE = 6;
const MAX_PREPARED_STATEMENTS = 200; // per server connection (PgBouncer 1.22+'s default), more than forkline names
const DIRECT = 'forkline-direct'; // the application_name of the direct connections, to tell them from pooled ones
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-pgbouncer-'));
fs.chmodSync(dataDir, 0o755);
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

const direct = (db: string) => `${pgServerUrl()}/${db}?application_name=${DIRECT}`;

const POOLERS = [
  {
    title: "Debian 12's PgBouncer 1.18, prepared statements off",
    build: 'debian',
    version: /^1\.(1\d|20)\./, // before protocol-level prepared statements
    env: { DATABASE_PREPARED_STATEMENTS: 'false' },
  },
  {
    title: 'PgBouncer 1.24.1 built from source, prepared statements on',
    build: 'source',
    version: /^1\.24\./,
    maxPreparedStatements: MAX_PREPARED_STATEMENTS,
    env: {}, // DATABASE_PREPARED_STATEMENTS at its default, on
  },
] as const;

/**
 * forkline's pooled connections prepared named statements at the protocol level
 * and PgBouncer carried them to its server connections, where they were reused:
 * its counters track only named statements (they stay 0 with
 * DATABASE_PREPARED_STATEMENTS=false), and binds far outnumber parses.
 */
async function expectNamedStatementsThrough(bouncer: PgBouncer, database: string) {
  const count = (rows: Record<string, unknown>[], column: string) => rows.reduce((n, r) => n + Number(r[column]), 0);
  const clients = (await bouncer.show('CLIENTS')).filter((c) => c.database === database);
  const servers = (await bouncer.show('SERVERS')).filter((c) => c.database === database);
  const [stats] = (await bouncer.show('STATS')).filter((c) => c.database === database);
  expect(count(clients, 'prepared_statements')).toBeGreaterThan(0);
  expect(count(servers, 'prepared_statements')).toBeGreaterThan(0);
  for (const s of servers) expect(Number(s.prepared_statements)).toBeLessThanOrEqual(MAX_PREPARED_STATEMENTS);
  const [parsed, prepared, bound] = ['total_client_parse_count', 'total_server_parse_count', 'total_bind_count'].map((c) => Number(stats[c]));
  expect(parsed).toBeGreaterThan(0);
  expect(prepared).toBeGreaterThan(0);
  expect(bound).toBeGreaterThan(2 * parsed); // prepared once per connection, run many times
}

for (const pooler of POOLERS)
  describe(`behind PgBouncer in transaction mode: ${pooler.title}`, () => {
    const running: ServiceProcess[] = [];
    let bouncer: PgBouncer;
    let admin: pg.Pool;
    let pooledDb: string; // a migrated database, served by the pooler
    const freshDb = `fresh_${crypto.randomBytes(4).toString('hex')}`; // listed in the pooler, not created yet
    const missingDb = `missing_${crypto.randomBytes(4).toString('hex')}`; // listed in the pooler, never created
    const start = async (env: Record<string, string>) => {
      const p = await startService({ env: { FORKLINE_DATA_DIR: dataDir, ...pooler.env, ...env } });
      running.push(p);
      return p;
    };

    // Long enough to build PgBouncer 1.24.1 when this file runs without `npm test`'s pretest.
    beforeAll(async () => {
      const url = await createTestDatabase();
      pooledDb = pgConfigFromUrl(url).database!;
      admin = new pg.Pool({ ...pgConfigFromUrl(url), application_name: 'forkline-test-admin', max: 2 });
      const { build } = pooler;
      const maxPreparedStatements = 'maxPreparedStatements' in pooler ? pooler.maxPreparedStatements : undefined;
      bouncer = await startPgBouncer(pgServerUrl(), [pooledDb, freshDb, missingDb], { poolSize: POOL_SIZE, build, maxPreparedStatements });
    }, 600_000);
    afterAll(async () => {
      await Promise.all(running.map((p) => p.stop('SIGKILL')));
      await bouncer?.stop();
      await admin?.end();
      const server = new pg.Client(pgConfigFromUrl(`${pgServerUrl()}/postgres`));
      await server.connect();
      await server.query(`DROP DATABASE IF EXISTS ${freshDb} WITH (FORCE)`);
      await server.end();
    });

    it(`is ${pooler.title.split(',')[0]}`, () => {
      expect(bouncer.version).toMatch(pooler.version);
    });

    it('starts with only the pooler (which has no "postgres" database): its own database is checked by connecting to it', async () => {
      const p = await start({ DATABASE_URL: bouncer.url(pooledDb) });
      const created = await postGraphQL(p.url, 'mutation { createSession(input: { title: "pooled" }) { id } }');
      const id = created.body.data.createSession.id;
      expect((await postGraphQL(p.url, 'query($id: ID!) { session(id: $id) { title eventCount } }', { id })).body.data.session).toEqual({
        title: 'pooled',
        eventCount: 1,
      });
      await p.stop();
    });

    it('creates a missing database and migrates it over DATABASE_DIRECT_URL, then serves through the pooler', async () => {
      const p = await start({ DATABASE_URL: bouncer.url(freshDb), DATABASE_DIRECT_URL: direct(freshDb) });
      const c = new pg.Client(pgConfigFromUrl(direct(freshDb)));
      await c.connect();
      const { rows } = await c.query<{ migration_name: string }>('SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL ORDER BY 1');
      await c.end();
      expect(rows.map((r) => r.migration_name)).toEqual(expectedMigrations());
      expect((await postGraphQL(p.url, 'mutation { createSession(input: { title: "fresh" }) { title } }')).body.data.createSession).toEqual({ title: 'fresh' });
      await p.stop();
    });

    it('says what to do when its database is missing and the maintenance database is out of reach', async () => {
      const failure = await start({ DATABASE_URL: bouncer.url(missingDb) }).then(
        () => 'started',
        (err: Error) => err.message,
      );
      const logged = failure
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l).msg as string);
      expect(logged).toEqual([
        `database "${missingDb}" does not exist, and it could not be created through the "postgres" database (no such database: postgres): ` +
          `create it (CREATE DATABASE "${missingDb}") or let this role connect to "postgres" with CREATEDB; behind a pooler, DATABASE_DIRECT_URL must reach Postgres itself`,
      ]);
    });

    const named = 'maxPreparedStatements' in pooler ? ", forkline's named statements prepared through the pooler" : '';
    it(`two processes behind it: 200 sessions × 3 messages, each answered once and in order, primary backends within the pool${named}`, async () => {
      // The second names its direct URL by the older DATABASE_LISTEN_URL, still honoured.
      const [a, b] = await Promise.all([
        start({ DATABASE_URL: bouncer.url(pooledDb), DATABASE_DIRECT_URL: direct(pooledDb) }),
        start({ DATABASE_URL: bouncer.url(pooledDb), DATABASE_LISTEN_URL: direct(pooledDb) }),
      ]);
      const { rows: made } = await admin.query<{ id: string }>(
        `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title)
       SELECT v, v, 'local', 'pooled' FROM (SELECT 'ses_pgb_' || replace(gen_random_uuid()::text, '-', '') AS v FROM generate_series(1, 200)) x RETURNING id, "treeId")
       INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s RETURNING id`,
      );
      const sessions = made.map((r) => r.id);
      const backends = sampleBackends(admin, [DIRECT, 'forkline-test-admin']);
      const sent = new Map<string, string[]>();
      const statuses: number[] = [];
      await Promise.all(
        sessions.map(async (id, i) => {
          for (let m = 0; m < 3; m++) {
            // A connection each (`connection: close`): a kept-alive one the service closes as idle (5 s) while this
            // loaded process sends on it is reset, and a POST is not retried (ECONNRESET, once under load here).
            const r = await postGraphQL(
              (i + m) % 2 ? b.url : a.url,
              'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }',
              { i: { sessionId: id, text: `message ${m}\n!call clock` } },
              { connection: 'close' },
            );
            statuses.push(r.status);
            if (r.body.data) sent.set(id, [...(sent.get(id) ?? []), r.body.data.sendMessage.inputId]);
          }
        }),
      );
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      await waitFor(
        async () => {
          const { rows } = await admin.query(
            `SELECT count(*)::int AS n FROM "Session" WHERE id = ANY($1) AND "turnCount" = 3 AND status = 'IDLE' AND "pendingInputCount" = 0`,
            [sessions],
          );
          return rows[0].n === sessions.length;
        },
        { what: 'every message answered', timeoutMs: 120_000 },
      );
      const peak = await backends.stop();
      if (named) await expectNamedStatementsThrough(bouncer, pooledDb);
      const { rows } = await admin.query<{ sessionId: string; type: string; data: { inputId?: string; reason?: string } }>(
        `SELECT "sessionId", type, data FROM "Event" WHERE "sessionId" = ANY($1) AND type IN ('turn/start', 'turn/end') ORDER BY "sessionId", seq`,
        [sessions],
      );
      for (const id of sessions) {
        const mine = rows.filter((e) => e.sessionId === id);
        expect(
          mine.filter((e) => e.type === 'turn/start').map((e) => e.data.inputId),
          id,
        ).toEqual(sent.get(id));
        expect(
          mine.filter((e) => e.type === 'turn/end').map((e) => e.data.reason),
          id,
        ).toEqual(['completed', 'completed', 'completed']);
      }
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThanOrEqual(POOL_SIZE);
      await Promise.all([a.stop(), b.stop()]);
    }, 180_000); // 20-31 s of the default 60 on a loaded machine; its wait for the answers alone allows 120
  });
