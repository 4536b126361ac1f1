import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { postGraphQL, startService } from '../helpers/process.ts';

const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-start-'));
fs.chmodSync(folder, 0o755); // the embedded Postgres runs as another user when we are root
afterAll(() => fs.rmSync(folder, { recursive: true, force: true }));

describe('npm start with no DATABASE_URL', () => {
  it('creates .data/ with an embedded Postgres, serves GraphQL, and keeps data across restarts', async () => {
    const env = { DATABASE_URL: undefined, FORKLINE_DATA_DIR: undefined };
    const first = await startService({ cwd: folder, env });
    let id: string;
    try {
      expect(fs.existsSync(path.join(folder, '.data', 'pg', 'PG_VERSION'))).toBe(true);
      expect((await postGraphQL(first.url, '{ __typename }')).body).toEqual({ data: { __typename: 'Query' } });
      const created = await postGraphQL(first.url, 'mutation { createSession(input: { title: "survives" }) { id } }');
      id = created.body.data.createSession.id;
      const graphiql = await fetch(first.url, { headers: { accept: 'text/html' } });
      expect(graphiql.status).toBe(200);
      expect(await graphiql.text()).toContain('forkline');
    } finally {
      expect(await first.stop('SIGTERM')).toBe(0);
    }
    expect(fs.existsSync(path.join(folder, '.data', 'pg', 'postmaster.pid'))).toBe(false); // Postgres stopped cleanly

    const second = await startService({ cwd: folder, env });
    try {
      const r = await postGraphQL(second.url, 'query($id: ID!) { session(id: $id) { title eventCount } }', { id });
      expect(r.body.data.session).toEqual({ title: 'survives', eventCount: 1 });
    } finally {
      expect(await second.stop('SIGINT')).toBe(0);
    }
  });

  it('starts on a data directory only its owner may enter (the upload spool used to leave it 0700), which the embedded Postgres user must enter', async () => {
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-start-'));
    fs.chmodSync(other, 0o755);
    fs.mkdirSync(path.join(other, '.data', 'uploads'), { recursive: true, mode: 0o700 });
    const service = await startService({ cwd: other, env: { DATABASE_URL: undefined, FORKLINE_DATA_DIR: undefined } });
    try {
      expect((await postGraphQL(service.url, '{ __typename }')).body).toEqual({ data: { __typename: 'Query' } });
      expect(fs.statSync(path.join(other, '.data', 'uploads')).mode & 0o777).toBe(0o700); // the spool stays private
    } finally {
      expect(await service.stop('SIGTERM')).toBe(0);
      fs.rmSync(other, { recursive: true, force: true });
    }
  });
});
