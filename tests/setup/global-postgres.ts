// One Postgres per test run: the embedded one (in a temp dir) unless
// TEST_DATABASE_URL names a server. A migrated template database is made once;
// every test file clones it (see tests/helpers/db.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

export const TEMPLATE_DB = 'forkline_test_template';

declare module 'vitest' {
  export interface ProvidedContext {
    pgServerUrl: string;
  }
}

export default async function setup(project: TestProject) {
  let serverUrl: string;
  let stop = async () => {};
  if (process.env.TEST_DATABASE_URL) {
    const u = new URL(process.env.TEST_DATABASE_URL);
    u.pathname = '';
    serverUrl = u.toString().replace(/\/$/, '');
  } else {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-test-pg-'));
    fs.chmodSync(dir, 0o755);
    const db = await startEmbeddedPostgres(path.join(dir, 'pg'));
    serverUrl = db.serverUrl;
    stop = async () => {
      await db.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    };
  }
  const admin = new pg.Client({ ...pgConfigFromUrl(`${serverUrl}/postgres`) });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DB} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
  await admin.end();
  await migrate(`${serverUrl}/${TEMPLATE_DB}`);
  project.provide('pgServerUrl', serverUrl);
  return stop;
}
