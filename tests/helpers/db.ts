import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { TEMPLATE_DB } from '../setup/global-postgres.ts';

export const pgServerUrl = () => inject('pgServerUrl');

/** A fresh, migrated database (a clone of the template); returns its URL. */
export async function createTestDatabase(): Promise<string> {
  const name = `t_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const admin = new pg.Client(pgConfigFromUrl(`${pgServerUrl()}/postgres`));
  await admin.connect();
  try {
    // Clones of one template must not run concurrently with a connection to it.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE_DB}`);
        break;
      } catch (err) {
        if (attempt > 50 || !String(err).includes('being accessed by other users')) throw err;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    }
  } finally {
    await admin.end();
  }
  return `${pgServerUrl()}/${name}`;
}

/** A fresh, empty database (no migration applied: a test builds an older form in it); returns its URL. */
export async function createEmptyDatabase(prefix: string): Promise<string> {
  const name = `${prefix}_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const admin = new pg.Client(pgConfigFromUrl(`${pgServerUrl()}/postgres`));
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return `${pgServerUrl()}/${name}`;
}
