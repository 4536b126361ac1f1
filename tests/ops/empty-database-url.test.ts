// `DATABASE_URL=` (set but empty, as an env file or a shell leaves it) means
// unset everywhere: the build's Prisma step must not try to
// download an engine, and the service uses its embedded Postgres.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

const prismaScript = (args: string[]) => {
  const r = spawnSync(process.execPath, [path.join(PROJECT_ROOT, 'scripts/prisma.mjs'), ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, DATABASE_URL: '' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
};

describe('an empty DATABASE_URL', () => {
  it("is unset for the build's Prisma step: it runs offline, with no engine download", () => {
    // `validate` takes the same path as the build's `generate` without writing the client.
    const r = prismaScript(['validate']);
    expect(r.output).not.toMatch(/binaries\.prisma\.sh|libquery_engine/);
    expect(r.output).toMatch(/is valid/);
    expect(r.status).toBe(0);
  });

  it('is refused with a clear message by a Prisma command that needs the database', () => {
    const r = prismaScript(['migrate', 'status']);
    expect(r.status).toBe(1);
    expect(r.output).toContain('DATABASE_URL is unset or empty: `prisma migrate status` needs the database');
  });

  it('is unset for the service (the embedded Postgres)', () => {
    const config = loadConfig({ DATABASE_URL: '', DATABASE_LISTEN_URL: '' });
    expect([config.DATABASE_URL, config.DATABASE_LISTEN_URL]).toEqual([undefined, undefined]);
  });
});
