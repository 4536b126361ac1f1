// Installs a Debian package the tests need (Chromium, PgBouncer, the tools that
// build a newer PgBouncer) when its file is missing and we may (root with
// apt-get); otherwise says how. The tests that need it then fail with the same
// message rather than being skipped.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

/** True when `binary` (a file `pkg` installs) exists, after installing `pkg` if it was missing and root may. */
export function ensureAptPackage({ binary, pkg, what }) {
  if (existsSync(binary)) return true;
  const canApt = process.getuid?.() === 0 && existsSync('/usr/bin/apt-get');
  if (!canApt) {
    console.error(`${pkg} is missing: install it (sudo apt-get install ${pkg}); ${what} will fail without it`);
    return false;
  }
  console.log(`installing Debian ${pkg} for ${what} (apt-get)…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const run = (args) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env }).status === 0;
  // apt-get update only when the package lists do not know the package yet.
  if (!run(['install', '-y', '-qq', pkg]) && !(run(['update', '-qq']) && run(['install', '-y', '-qq', pkg]))) {
    console.error(`apt-get could not install ${pkg}: ${what} will fail`);
    return false;
  }
  return existsSync(binary);
}
