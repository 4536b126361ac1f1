// The store pool's timestamptz parser reads exactly what pg's own parser reads.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { parseTimestamptz } from '../../src/db/pg-types.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

const pgParse = pg.types.getTypeParser(1184, 'text') as (s: string) => Date;
const same = (text: string) => expect(parseTimestamptz(text).valueOf(), text).toEqual(pgParse(text).valueOf());

describe('timestamptz parser', () => {
  it('agrees with pg on every shape Postgres sends', () => {
    for (const t of [
      '2026-11-30 08:55:01.123+00',
      '2026-11-30 08:55:01+00',
      '2026-11-30 08:55:01.1-03',
      '2026-11-30 08:55:01.123456+05:30',
      '2026-11-30 08:55:01.999999+00',
      '2026-11-30 08:55:01.0012+00',
      '2026-11-30 23:59:59.5+14',
      '2024-02-29 12:00:00-12',
      '1900-01-01 00:00:00+00:09:21',
      'infinity',
      '-infinity',
      '0044-03-15 12:00:00+00 BC',
      '0099-01-01 00:00:00+00',
      '10000-01-01 00:00:00+00',
      '1970-01-01 00:00:00+00',
      '1969-12-31 23:59:59.999+00',
    ])
      same(t);
  });

  it('agrees with pg on random instants in any offset', () => {
    for (let i = 0; i < 5000; i++) {
      const d = new Date(Math.floor(Math.random() * 8e12) - 2e12);
      const offset = Math.floor(Math.random() * 28 - 12) * 60 + (Math.random() < 0.2 ? 30 : 0);
      const local = new Date(d.getTime() + offset * 60_000).toISOString();
      const sign = offset < 0 ? '-' : '+';
      const hh = String(Math.floor(Math.abs(offset) / 60)).padStart(2, '0');
      const mm = String(Math.abs(offset) % 60).padStart(2, '0');
      if (local.startsWith('-') || local.startsWith('+')) continue;
      same(`${local.slice(0, 10)} ${local.slice(11, 23)}${sign}${hh}${mm === '00' ? '' : `:${mm}`}`);
    }
  });

  it('reads what Postgres really sends, in any session time zone', async () => {
    const client = new pg.Client(pgConfigFromUrl(await createTestDatabase()));
    await client.connect();
    try {
      for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Pacific/Kiritimati', 'Europe/Amsterdam']) {
        await client.query(`SET TIME ZONE '${zone}'`);
        const { rows } = await client.query({
          text: `SELECT t::text AS text FROM (VALUES (now()), ('1900-01-01 00:00:00Z'::timestamptz), ('2000-02-29 23:59:59.999999Z'), ('infinity'), ('0044-03-15 12:00:00Z BC')) v(t)`,
        });
        for (const r of rows) same(r.text);
      }
    } finally {
      await client.end();
    }
  });
});
