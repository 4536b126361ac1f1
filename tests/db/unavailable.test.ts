import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/unavailable.ts';

describe('isDatabaseUnavailable', () => {
  it('a unix-domain socket whose server is stopped (its file gone) is the database away, not an error in what was asked', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-nosocket-'));
    try {
      const client = new pg.Client({ host: dir, port: 5432, user: 'forkline', password: 'forkline', database: 'x' });
      const err = await client.connect().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: 'ENOENT', syscall: 'connect' });
      expect(isDatabaseUnavailable(err)).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a missing file elsewhere is not', () => {
    let err: unknown;
    try {
      fs.readFileSync(path.join(os.tmpdir(), 'forkline-no-such-file-at-all'));
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'ENOENT' });
    expect(isDatabaseUnavailable(err)).toBe(false);
  });
});
