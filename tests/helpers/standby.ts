// A streaming hot standby of an embedded Postgres the test starts for it
// (startPrimary: the suite's shared one holds every test file's database, all
// of which a base backup would copy), made the way a base backup is made by hand: the embedded package ships
// only initdb/pg_ctl/postgres, and Debian's pg_basebackup (15) refuses a newer
// server. A physical replication slot is created first so the primary keeps the
// WAL the copy needs; pg_backup_start/stop bracket a file copy of the data
// directory; the standby starts from the backup label and streams from the slot.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort, embeddedPostgresPackage, startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { ensureDatabase, migrate } from '../../src/db/migrate.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { waitFor } from './wait.ts';

/** The embedded package's `postgres` (the same binary as the primary's). */
const postgresBinary = async () => ((await import(embeddedPostgresPackage())) as { postgres: string }).postgres;

export interface Primary {
  /** `${serverUrl}/<db>`. */
  serverUrl: string;
  /** A migrated database of this name on it; returns its URL. */
  database(name: string): Promise<string>;
  stop(): Promise<void>;
}

/** An embedded Postgres of the test's own, in a temporary directory. */
export async function startPrimary(): Promise<Primary> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-primary-'));
  fs.chmodSync(dir, 0o755);
  const pg = await startEmbeddedPostgres(path.join(dir, 'pg'));
  return {
    serverUrl: pg.serverUrl,
    async database(name: string) {
      const url = `${pg.serverUrl}/${name}`;
      await ensureDatabase(url);
      await migrate(url);
      return url;
    },
    async stop() {
      await pg.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Standby {
  /** `${serverUrl}/<db>` reads the standby. */
  serverUrl: string;
  stop(): Promise<void>;
  /** Stops and starts it again on the same port (it resumes streaming from its slot). */
  restart(): Promise<void>;
  /** Stops it and drops its slot on the primary. */
  destroy(): Promise<void>;
}

function owner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout);
  return { uid: id('-u'), gid: id('-g') };
}

/** `primaryServerUrl`: a superuser URL of the primary server (database part ignored); its data directory must be readable here. */
export async function startStandby(primaryServerUrl: string): Promise<Standby> {
  const primary = new pg.Client(pgConfigFromUrl(`${primaryServerUrl}/postgres`));
  await primary.connect();
  const slot = `forkline_standby_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-standby-'));
  fs.chmodSync(dir, 0o755);
  const dataDir = path.join(dir, 'data');
  const port = await freePort();
  const cfg = pgConfigFromUrl(primaryServerUrl);
  try {
    const { rows } = await primary.query<{ data_directory: string; max_connections: string }>(
      `SELECT current_setting('data_directory') AS data_directory, current_setting('max_connections') AS max_connections`,
    );
    const source = rows[0].data_directory;
    await primary.query('SELECT pg_create_physical_replication_slot($1, true)', [slot]);
    await primary.query(`SELECT pg_backup_start('forkline-standby', true)`);
    fs.cpSync(source, dataDir, {
      recursive: true,
      // The running server's own files (its unix socket among them), and WAL (streamed from the slot instead).
      filter: (src) => {
        const rel = path.relative(source, src);
        return (
          !['postmaster.pid', 'postmaster.opts', 'standby.signal', 'recovery.signal'].includes(rel) &&
          !/^\.s\.PGSQL\./.test(rel) &&
          !/^pg_wal\/./.test(rel) &&
          !/^pg_replslot\/./.test(rel)
        );
      },
    });
    const stop = await primary.query<{ labelfile: string; spcmapfile: string }>('SELECT labelfile, spcmapfile FROM pg_backup_stop(true)');
    fs.writeFileSync(path.join(dataDir, 'backup_label'), stop.rows[0].labelfile);
    if (stop.rows[0].spcmapfile) fs.writeFileSync(path.join(dataDir, 'tablespace_map'), stop.rows[0].spcmapfile);
    fs.mkdirSync(path.join(dataDir, 'pg_wal', 'archive_status'), { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'standby.signal'), '');
    fs.appendFileSync(
      path.join(dataDir, 'postgresql.auto.conf'),
      [
        `primary_conninfo = 'host=${cfg.host} port=${cfg.port} user=${cfg.user} password=${cfg.password} application_name=${slot}'`,
        `primary_slot_name = '${slot}'`,
        'hot_standby = on',
        'hot_standby_feedback = on',
        `max_connections = ${rows[0].max_connections}`,
        '',
      ].join('\n'),
    );
    const o = owner();
    if (o) spawnSync('chown', ['-R', `${o.uid}:${o.gid}`, dir]);
    fs.chmodSync(dataDir, 0o700);
  } catch (err) {
    await primary.query('SELECT pg_drop_replication_slot($1) WHERE EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)', [slot]).catch(() => {});
    await primary.end();
    throw err;
  }
  await primary.end();

  const serverUrl = `postgresql://${encodeURIComponent(String(cfg.user))}:${encodeURIComponent(String(cfg.password))}@127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let out = '';
  const launch = async () => {
    out = '';
    const c = spawn(await postgresBinary(), ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='], {
      ...owner(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    c.stdout!.on('data', (d) => (out += d));
    c.stderr!.on('data', (d) => (out += d));
    child = c;
    await waitFor(
      async () => {
        if (c.exitCode !== null) throw new Error(`standby exited: ${out}`);
        const client = new pg.Client(pgConfigFromUrl(`${serverUrl}/postgres`));
        await client.connect();
        try {
          const { rows } = await client.query<{ streaming: boolean }>(
            `SELECT pg_is_in_recovery() AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') AS streaming`,
          );
          return rows[0].streaming;
        } finally {
          await client.end();
        }
      },
      { what: `the standby on port ${port} to stream`, timeoutMs: 30_000, intervalMs: 100 },
    ).catch((err) => {
      c.kill('SIGKILL');
      throw new Error(`${String(err)}\n${out}`);
    });
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGINT'); // fast shutdown
    await exited;
  };
  await launch();
  return {
    serverUrl,
    stop,
    async restart() {
      await stop();
      await launch();
    },
    async destroy() {
      await stop();
      const p = new pg.Client(pgConfigFromUrl(`${primaryServerUrl}/postgres`));
      await p.connect();
      await p.query('SELECT pg_drop_replication_slot($1) WHERE EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)', [slot]).catch(() => {});
      await p.end();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * forkline_standby_reads_total from a /metrics text, summed by who answered
 * (standby, primary, both), over the reads named (events, sessions, session,
 * search; default: all of them).
 */
export function standbyReads(metricsText: string, reads?: readonly string[]): Record<'standby' | 'primary' | 'both', number> {
  const out = { standby: 0, primary: 0, both: 0 };
  for (const m of metricsText.matchAll(/^forkline_standby_reads_total\{([^}]*)\} (\d+)/gm)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (reads && !reads.includes(labels.read)) continue;
    out[labels.served as keyof typeof out] += Number(m[2]);
  }
  return out;
}
