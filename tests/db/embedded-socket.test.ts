// The embedded Postgres is reached through a unix-domain socket: in its data
// directory, or in a temporary directory when that path is too long for a socket.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/** A temporary directory `depth` characters deep or more, enterable by the Postgres OS user when tests run as root. */
function tempDir(depth: number): string {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-sock-'));
  fs.chmodSync(top, 0o755);
  dirs.push(top);
  let dir = top;
  while (dir.length < depth) {
    dir = path.join(dir, 'a-rather-long-folder-name');
    fs.mkdirSync(dir, { mode: 0o755 });
  }
  return dir;
}

async function serverSays(url: string): Promise<{ socket: boolean }> {
  const client = new pg.Client(pgConfigFromUrl(`${url}/postgres`));
  await client.connect();
  try {
    // A unix-domain connection has no client address.
    const { rows } = await client.query<{ addr: string | null }>('SELECT inet_client_addr() AS addr');
    return { socket: rows[0].addr === null };
  } finally {
    await client.end();
  }
}

describe('the embedded Postgres socket', () => {
  it('is in the data directory, and the server URL reaches it there', async () => {
    const dataDir = path.join(tempDir(0), 'pg');
    const db = await startEmbeddedPostgres(dataDir);
    try {
      const { host, port } = pgConfigFromUrl(db.serverUrl);
      expect(host).toBe(dataDir);
      expect(fs.statSync(path.join(dataDir, `.s.PGSQL.${port}`)).isSocket()).toBe(true);
      expect(await serverSays(db.serverUrl)).toEqual({ socket: true });
    } finally {
      await db.stop();
    }
  }, 120_000);

  it('is in a temporary directory, removed at stop, when the data directory is too deep for a socket path', async () => {
    const dataDir = path.join(tempDir(120), 'pg');
    const db = await startEmbeddedPostgres(dataDir);
    let host: string | undefined;
    try {
      host = pgConfigFromUrl(db.serverUrl).host;
      expect(host?.startsWith(os.tmpdir())).toBe(true);
      expect(host).not.toContain(dataDir);
      expect(await serverSays(db.serverUrl)).toEqual({ socket: true });
    } finally {
      await db.stop();
    }
    expect(fs.existsSync(host!)).toBe(false);
  }, 120_000);
});
