// Real PgBouncers in transaction mode in front of the test Postgres, serving only
// the databases they are given: like a managed pooler, no `postgres` database.
// Two builds: Debian 12's package (1.18, no protocol-level prepared statements;
// apt-installed) and 1.24.1 built from source into .cache/ (prepared statements
// on); scripts/ensure-pgbouncer.mjs provides both, and runs from here when one is missing.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/db/embedded.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { PROJECT_ROOT } from './process.ts';
import { waitFor } from './wait.ts';

export const PGBOUNCER_BINARIES = {
  debian: process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer',
  source: path.join(PROJECT_ROOT, '.cache/pgbouncer-1.24.1/pgbouncer'), // scripts/build-pgbouncer.mjs
};
export type PgBouncerBuild = keyof typeof PGBOUNCER_BINARIES;

export interface PgBouncer {
  /** The URL of `database` through the pooler (same user and password as upstream). */
  url(database: string): string;
  version: string;
  /** Runs a command of PgBouncer's admin console (SHOW …) as its stats user. */
  show(what: string): Promise<Record<string, string | number | null>[]>;
  stop(): Promise<void>;
}

/** Runs as the `postgres` OS user when we are root (PgBouncer refuses to run as root). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout);
  return { uid: id('-u'), gid: id('-g') };
}

/** Runs scripts/ensure-pgbouncer.mjs for `build` (an install or a build of a minute or two), echoing its progress. */
function ensurePgBouncer(build: PgBouncerBuild): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'scripts/ensure-pgbouncer.mjs'), build], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const echo = (c: Buffer) => {
      out += c;
      process.stdout.write(c);
    };
    child.stdout!.on('data', echo);
    child.stderr!.on('data', echo);
    child.on('close', () => resolve(out));
  });
}

export async function pgBouncerVersion(build: PgBouncerBuild = 'debian'): Promise<string> {
  const binary = PGBOUNCER_BINARIES[build];
  const ensured = fs.existsSync(binary) ? '' : await ensurePgBouncer(build);
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  const m = /PgBouncer (\d+\.\d+\.\d+)/.exec(out.stdout ?? '');
  const how = build === 'debian' ? 'apt-get install pgbouncer, or set PGBOUNCER_PATH' : 'node scripts/ensure-pgbouncer.mjs source builds it';
  if (!m) throw new Error(`no PgBouncer at ${binary} (${how}): ${ensured.trim() || out.error || out.stderr}`);
  return m[1];
}

/**
 * `upstreamUrl`: a URL of the test Postgres (its database part is ignored).
 * `poolSize`: server connections per database and user, what bounds the backends.
 * `maxPreparedStatements`: protocol-level prepared statements per server connection (1.21+; unset: the build's default).
 */
export async function startPgBouncer(
  upstreamUrl: string,
  databases: string[],
  opts: { poolSize: number; maxClients?: number; build?: PgBouncerBuild; maxPreparedStatements?: number },
): Promise<PgBouncer> {
  const build = opts.build ?? 'debian';
  const version = await pgBouncerVersion(build);
  const up = pgConfigFromUrl(upstreamUrl);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-pgbouncer-'));
  const port = await freePort();
  const dbs = databases.map((d) => `${d} = host=${up.host} port=${up.port} dbname=${d} user=${up.user} password=${up.password}`);
  fs.writeFileSync(path.join(dir, 'users.txt'), `"${up.user}" "${up.password}"\n`);
  fs.writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      ...dbs,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${opts.poolSize}`,
      'min_pool_size = 0',
      'reserve_pool_size = 0',
      `max_client_conn = ${opts.maxClients ?? 1000}`,
      'server_reset_query =',
      'ignore_startup_parameters = extra_float_digits',
      `stats_users = ${up.user}`,
      ...(opts.maxPreparedStatements === undefined ? [] : [`max_prepared_statements = ${opts.maxPreparedStatements}`]),
      '',
    ].join('\n'),
  );
  const owner = runAs();
  if (owner) for (const f of ['', 'users.txt', 'pgbouncer.ini']) fs.chownSync(path.join(dir, f), owner.uid, owner.gid);
  const child: ChildProcess = spawn(PGBOUNCER_BINARIES[build], [path.join(dir, 'pgbouncer.ini')], { ...owner, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const url = (database: string) =>
    `postgresql://${encodeURIComponent(String(up.user))}:${encodeURIComponent(String(up.password))}@127.0.0.1:${port}/${database}`;
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${out}`);
        const c = new pg.Client(pgConfigFromUrl(url(databases[0])));
        await c.connect();
        await c.end();
        return true;
      },
      { what: `PgBouncer on port ${port}`, timeoutMs: 15_000, intervalMs: 100 },
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${String(err)}\n${out}`, { cause: err });
  }
  return {
    url,
    version,
    async show(what) {
      const c = new pg.Client(pgConfigFromUrl(url('pgbouncer')));
      await c.connect();
      try {
        return (await c.query(`SHOW ${what}`)).rows; // the simple protocol, all the admin console speaks
      } finally {
        await c.end();
      }
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGINT'); // SIGINT: fast shutdown
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Samples, every 20 ms until stopped, the backends serving `admin`'s database
 * other than those named `ignore` (the direct connections and the sampler's own
 * pool): behind the pooler, what Postgres spends on the pooled clients.
 * stop() resolves with the most seen at once.
 */
export function sampleBackends(admin: pg.Pool, ignore: string[]): { stop(): Promise<number> } {
  let peak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> ALL($1)`,
        [ignore],
      );
      peak = Math.max(peak, rows[0].n);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      sampling = false;
      await sampler;
      return peak;
    },
  };
}
