// FORKLINE_DATA_DIR inside a folder the Postgres OS user cannot enter. As root (the tests run as root), initdb runs as `postgres`, and its
// own error was a bare "Permission denied": the service now names the folder
// and what to do.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startService } from '../helpers/process.ts';

const closed = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-closed-'));
fs.chmodSync(closed, 0o700); // root's own: the postgres user may not enter
afterAll(() => fs.rmSync(closed, { recursive: true, force: true }));

describe('a data directory the embedded Postgres user cannot reach', () => {
  it('fails to start with an error naming the folder in the way and what to do', { timeout: 60_000 }, async () => {
    const dataDir = path.join(closed, 'forkline-data');
    const started = startService({ env: { DATABASE_URL: undefined, FORKLINE_DATA_DIR: dataDir } });
    const err: Error = await started.then(
      (s) => (s.stop(), new Error('the service started')),
      (e: Error) => e,
    );
    expect(err.message).toMatch(/service exited with 1 before serving/);
    const fatal = err.message
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .find((l) => l.level === 60);
    expect(fatal.msg).toBe(
      `the embedded Postgres cannot use ${path.join(dataDir, 'pg')}: it runs as the "postgres" OS user (forkline runs as root), ` +
        `which cannot enter ${closed}. Set FORKLINE_DATA_DIR to a directory outside it, or let that user in (chmod o+x ${closed})`,
    );

    // The advice works.
    fs.chmodSync(closed, 0o701);
    const service = await startService({ env: { DATABASE_URL: undefined, FORKLINE_DATA_DIR: dataDir } });
    expect(await service.stop('SIGTERM')).toBe(0);
  });
});
