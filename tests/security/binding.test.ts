// Local mode (no FORKLINE_API_TOKENS) refuses to listen beyond loopback
// unless FORKLINE_ALLOW_INSECURE=1: the real service, before it
// starts anything.
import { describe, expect, it } from 'vitest';
import { startService } from '../helpers/process.ts';

describe('npm start with a non-loopback HOST and no tokens', () => {
  it('exits with a clear error naming both ways out', async () => {
    const failure = await startService({
      env: { HOST: '0.0.0.0', FORKLINE_API_TOKENS: undefined, FORKLINE_ALLOW_INSECURE: undefined, DATABASE_URL: undefined },
      timeoutMs: 30_000,
    }).then(
      () => undefined,
      (err: Error) => err.message,
    );
    expect(failure).toMatch(/service exited with 1 before serving/);
    const record = JSON.parse(failure!.split('\n').find((l) => l.includes('refusing to listen'))!);
    expect(record).toMatchObject({ level: 60, service: 'forkline' });
    expect(record.msg).toMatch(/^refusing to listen on HOST=0\.0\.0\.0 without authentication: set FORKLINE_API_TOKENS=.*or FORKLINE_ALLOW_INSECURE=1/);
    // Refused before anything started: no embedded Postgres (npm start logs "starting embedded Postgres" before it does).
    expect(failure).not.toContain('embedded Postgres');
  });

  it('rejects malformed FORKLINE_API_TOKENS at start without printing the token', async () => {
    const failure = await startService({ env: { FORKLINE_API_TOKENS: 'tooshort-secret=alpha' }, timeoutMs: 30_000 }).then(
      () => undefined,
      (err: Error) => err.message,
    );
    expect(failure).toMatch(/invalid configuration: FORKLINE_API_TOKENS: a token is shorter than 16 characters/);
    expect(failure).not.toContain('tooshort-secret');
  });
});
