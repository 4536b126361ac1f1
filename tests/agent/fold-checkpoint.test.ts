// A cold start on a long log without a compaction reads the agent's fold
// checkpoint and the events after it, never the whole log (docs/long-sessions.md
// "Cold starts"), and the model is sent exactly what a full replay would send.
// Rows read are counted as the compaction bench counts them.
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createLongSession } from '../../bench/long-session.ts';
import { buildModelMessages } from '../../src/core/model-request.ts';
import type { LogEvent } from '../../src/core/events.ts';

const scope = { tenant: 'local' };
const EVERY = 2_000;
const EVENTS = 30_000;
/** A window no request here reaches: nothing is compacted, the request is the whole conversation. */
const NO_COMPACTION = { defaultContextTokens: 100_000_000 };

let databaseUrl: string;
let rowsRead = 0;
const open = (foldCheckpointEvents: number, foldCheckpointMaxBytes?: number) =>
  createApp({
    databaseUrl,
    foldCheckpointMaxBytes,
    log: () => {},
    budget: NO_COMPACTION,
    foldCheckpointEvents,
    onQuery: (sql, rows) => {
      if (/FROM "Event"/.test(sql)) rowsRead += rows;
    },
  });
const allEvents = async (app: App, id: string) => {
  const out: LogEvent[] = [];
  for await (const page of app.services.store.log.pages(id, { afterSeq: -1, pageSize: 5000 })) out.push(...page);
  return out;
};
/** One message answered; the event rows it read and the messages the model was sent. */
const turn = async (app: App, id: string, text: string) => {
  rowsRead = 0;
  await app.services.controller.sendMessage(scope, id, text);
  await app.services.host.idle();
  return { rows: rowsRead, messages: app.models.scripted.lastRequest!.messages };
};

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
});

describe('cold start from a fold checkpoint', () => {
  let id: string;
  afterAll(() => undefined);

  it('the first run on a log nobody folded replays it once and leaves a checkpoint; a fresh process then reads only the tail', async () => {
    let app = await open(EVERY);
    try {
      id = (await createLongSession({ store: app.services.store, db: { pool: app.services.store.pool } }, EVENTS)).id;
      const first = await turn(app, id, 'first');
      expect(first.rows).toBeGreaterThanOrEqual(EVENTS); // a log written in bulk, never folded: one replay
      expect(await app.services.store.foldCheckpoints.nearest(id)).toMatchObject({ seq: EVENTS + 6 }); // after the turn's 7 events
    } finally {
      await app.close();
    }
    // A fresh process: no fold in memory.
    app = await open(EVERY);
    try {
      const cold = await turn(app, id, 'second');
      expect(cold.rows).toBeLessThan(5_100); // the first page (the log is longer) and the tail after the checkpoint
      // Exactly the request a full replay builds: the log before this turn, then the new input.
      const log = await allEvents(app, id);
      const start = log.findLastIndex((e) => e.type === 'turn/start');
      expect(cold.messages).toEqual(buildModelMessages(log.slice(0, start + 1)));
      expect(cold.messages.at(-1)).toEqual({ role: 'user', content: 'second' });
      // The restored fold renders its history again (a compaction's range, then its summary in place): still a full replay's request.
      await app.services.controller.compactSession(scope, id, {});
      const after = await turn(app, id, 'third');
      const full = await allEvents(app, id);
      expect(after.messages).toEqual(buildModelMessages(full.slice(0, full.findLastIndex((e) => e.type === 'turn/start') + 1)));
      expect(after.messages[0]).toMatchObject({ role: 'system', content: expect.stringMatching(/^Summary of earlier conversation/) });
    } finally {
      await app.close();
    }
  });

  it('a fork cut after the checkpoint uses it (the checkpoint is its parent prefix); one cut before it replays from seq 0', async () => {
    let app = await open(EVERY);
    const cp = (await app.services.store.foldCheckpoints.nearest(id))!;
    const after = await app.services.controller.forkSession(scope, id, cp.seq + 3);
    const before = await app.services.controller.forkSession(scope, id, cp.seq - 10);
    await app.close();
    // Fresh processes: only the stored checkpoints can help.
    app = await open(0); // writes none of its own
    try {
      const child = await turn(app, after.session.id, 'in the child');
      expect(child.rows).toBeLessThan(5_100);
      const log = await allEvents(app, after.session.id);
      expect(child.messages).toEqual(buildModelMessages(log.slice(0, log.findLastIndex((e) => e.type === 'turn/start') + 1)));
      expect(
        child.messages
          .filter((m) => m.role === 'user')
          .map((m) => m.content)
          .slice(-3),
      ).toEqual(['first', 'second', 'in the child']);
      const early = await turn(app, before.session.id, 'in the early child');
      expect(early.rows).toBeGreaterThanOrEqual(cp.seq - 10); // no checkpoint at or before its cut: replayed
      const earlyLog = await allEvents(app, before.session.id);
      expect(early.messages).toEqual(buildModelMessages(earlyLog.slice(0, earlyLog.findLastIndex((e) => e.type === 'turn/start') + 1)));
      expect(early.messages.filter((m) => m.role === 'user').map((m) => m.content)).not.toContain('second');
    } finally {
      await app.close();
    }
  });

  describe('a damaged checkpoint read back (docs/operations.md "Threat model")', () => {
    const BOUND = 32 * 2 ** 20;
    const garbageJson = zlib.gzipSync('{"v":2,"state":{"nextSeq":1}\n[not json');
    const notASnapshot = () => garbageJson;
    // Format 3 kept answered calls by bare id: its rendered messages may answer a reused id's later call with an earlier step's result;
    // format 4's may send a call under an id no provider takes (before wire ids).
    const olderFormat = (v: number) => (b: Buffer) => {
      const text = zlib.gunzipSync(b).toString('utf8');
      expect(text.startsWith('{"v":5,')).toBe(true);
      return zlib.gzipSync(text.replace('{"v":5,', `{"v":${v},`));
    };
    const formatThree = olderFormat(3);
    const formatFour = olderFormat(4);
    it.each([
      ['its state truncated', 'state', (b: Buffer) => b.subarray(0, Math.floor(b.length / 2))],
      ['its state not gzip at all', 'state', () => Buffer.from('not gzip, just bytes')],
      ['its history truncated', 'history', (b: Buffer) => b.subarray(0, b.length - 9)],
      ['its state a decompression bomb past the bound', 'state', () => zlib.gzipSync(Buffer.alloc(BOUND + 2 ** 20, 0x20), { level: 9 })],
      ['its history a decompression bomb past the bound', 'history', () => zlib.gzipSync(Buffer.alloc(BOUND + 2 ** 20, 0x20), { level: 9 })],
      ['its state whole gzip of what is not a snapshot', 'state', notASnapshot],
      ['its state of format 3 (calls by bare id, before ids reused across steps were told apart)', 'state', formatThree],
      ['its state of format 4 (calls by their own ids, before wire ids)', 'state', formatFour],
    ] as const)('%s: the turn replays the log and is answered as a full replay answers it', async (_name, column, damage) => {
      let app = await open(0, BOUND);
      const cp = await app.services.store.foldCheckpoints.nearest(id);
      const { rows } = await app.services.store.pool.query<{ sessionId: string; seq: number; bytes: Buffer }>(
        `SELECT "sessionId", seq, ${column} AS bytes FROM "FoldCheckpoint" WHERE seq = $1 AND "sessionId" = $2`,
        [cp!.seq, cp!.sessionId],
      );
      const [row] = rows;
      await app.close();
      const put = (bytes: Buffer) =>
        app.services.store.pool.query(`UPDATE "FoldCheckpoint" SET ${column} = $1 WHERE seq = $2 AND "sessionId" = $3`, [bytes, row.seq, row.sessionId]);
      app = await open(0, BOUND); // a fresh process, writing no checkpoint of its own
      try {
        // Whole, the checkpoint restores within this bound (the first page and the tail, which each case before grew by two turns).
        expect((await turn(app, id, 'whole')).rows).toBeLessThan(5_200);
        await app.close();
        app = await open(0, BOUND);
        await put(damage(row.bytes));
        // Not whole gzip within the bound: not read back at all; whole gzip of a non-snapshot: read, and not restored.
        if (damage !== notASnapshot && damage !== formatThree && damage !== formatFour)
          expect(await app.services.store.foldCheckpoints.nearest(id)).toBeUndefined();
        const replayed = await turn(app, id, 'after the damage');
        expect(replayed.rows).toBeGreaterThan(0);
        const log = await allEvents(app, id);
        expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
        expect(replayed.messages).toEqual(buildModelMessages(log.slice(0, log.findLastIndex((e) => e.type === 'turn/start') + 1)));
      } finally {
        await put(row.bytes);
        await app.close();
      }
    });
  });
});
