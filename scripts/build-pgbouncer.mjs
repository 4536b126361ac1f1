// PgBouncer 1.21+ (protocol-level prepared statements) for the pooler tests:
// Debian 12 packages only 1.18, so 1.24.1 is built from upstream's source
// tarball, fetched from the Debian pool (apt's own host, reachable wherever apt
// is), checked against its sha256, into .cache/ (reused once built).
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureAptPackage } from './apt-package.mjs';

export const SOURCE = {
  version: '1.24.1',
  url: 'http://deb.debian.org/debian/pool/main/p/pgbouncer/pgbouncer_1.24.1.orig.tar.gz',
  // Upstream's pgbouncer-1.24.1.tar.gz (the same sha256 as on pgbouncer.org).
  sha256: 'da72a3aba13072876d055a3e58dd4aba4a5de4ed6148e73033185245598fd3e0',
};

const CACHE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '.cache');
export const BUILT_PGBOUNCER = path.join(CACHE, `pgbouncer-${SOURCE.version}`, 'pgbouncer');

// What configure and make need, each with a file that shows it is installed.
const TOOLS = [
  { binary: '/usr/bin/gcc', pkg: 'gcc' },
  { binary: '/usr/bin/make', pkg: 'make' },
  { binary: '/usr/bin/pkg-config', pkg: 'pkg-config' },
  { binary: '/usr/include/event2/event.h', pkg: 'libevent-dev' },
  { binary: '/usr/include/openssl/ssl.h', pkg: 'libssl-dev' },
];

/** Runs a build step, its output in `logFile`; on failure the error ends with the log's tail. */
function run(cmd, args, cwd, logFile) {
  return new Promise((resolve, reject) => {
    const log = fs.openSync(logFile, 'a');
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', log, log] });
    child.on('error', (err) => (fs.closeSync(log), reject(err)));
    child.on('exit', (code) => {
      fs.closeSync(log);
      if (code === 0) return resolve();
      const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n');
      reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${tail}`));
    });
  });
}

/**
 * The path of a PgBouncer 1.24.1 binary under .cache/, built first when missing.
 * Throws saying why when it cannot be built (no compiler and not root, no network, …).
 */
export async function buildPgBouncer({ say = (m) => console.log(m) } = {}) {
  if (fs.existsSync(BUILT_PGBOUNCER)) return BUILT_PGBOUNCER;
  const what = `building PgBouncer ${SOURCE.version} (the pooler tests with prepared statements)`;
  const missing = TOOLS.filter((t) => !ensureAptPackage({ ...t, what }));
  if (missing.length)
    throw new Error(
      `cannot build PgBouncer ${SOURCE.version}: ${missing.map((t) => t.pkg).join(', ')} missing (apt-get install ${missing.map((t) => t.pkg).join(' ')})`,
    );
  const started = Date.now();
  fs.mkdirSync(CACHE, { recursive: true });
  // Parallel test files may build at once: each in its own folder, the first to finish wins.
  const work = fs.mkdtempSync(path.join(CACHE, `pgbouncer-${SOURCE.version}.building-`));
  try {
    say(`PgBouncer ${SOURCE.version}: downloading ${SOURCE.url}`);
    const res = await fetch(SOURCE.url).catch((err) => {
      throw new Error(`cannot download ${SOURCE.url}: ${err.cause?.message ?? err.message}`);
    });
    if (!res.ok) throw new Error(`cannot download ${SOURCE.url}: HTTP ${res.status}`);
    const tarball = Buffer.from(await res.arrayBuffer());
    const sha256 = createHash('sha256').update(tarball).digest('hex');
    if (sha256 !== SOURCE.sha256) throw new Error(`${SOURCE.url} has sha256 ${sha256}, expected ${SOURCE.sha256}: not built`);
    fs.writeFileSync(path.join(work, 'source.tar.gz'), tarball);
    const logFile = path.join(work, 'build.log');
    await run('tar', ['xzf', 'source.tar.gz'], work, logFile);
    const src = path.join(work, `pgbouncer-${SOURCE.version}`);
    say(`PgBouncer ${SOURCE.version}: configuring`);
    // Only what the tests use: no c-ares (libevent resolves names), no PAM or systemd, stripped.
    await run('./configure', ['--without-cares', '--without-pam', '--without-systemd', '--disable-debug'], src, logFile);
    say(`PgBouncer ${SOURCE.version}: compiling (make -j2)`);
    await run('make', ['-j2'], src, logFile);
    const done = path.join(work, 'done');
    fs.mkdirSync(done);
    fs.copyFileSync(path.join(src, 'pgbouncer'), path.join(done, 'pgbouncer'));
    fs.chmodSync(path.join(done, 'pgbouncer'), 0o755);
    try {
      fs.renameSync(done, path.dirname(BUILT_PGBOUNCER));
    } catch (err) {
      if (!fs.existsSync(BUILT_PGBOUNCER)) throw err; // else another build finished first
    }
    say(`PgBouncer ${SOURCE.version}: built in ${((Date.now() - started) / 1000).toFixed(0)} s: ${BUILT_PGBOUNCER}`);
    return BUILT_PGBOUNCER;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
