// Recordings and runner batches that claim what they are not (docs/operations.md
// "Threat model"): events marked synthetic that repair never writes, and
// compaction instructions past compactSession's limit, through POST /recordings,
// importRecording and appendEvents. Nothing of a refused one is written.
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { MAX_COMPACTION_INSTRUCTIONS_CHARS } from '../../src/core/text-limits.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const HEADER = { format: 'forkline.recording', version: 4, session: { id: 'ses_hostile', title: 'hostile' } };
const IMPORT = `mutation($r: String!) { importRecording(recording: $r) { id eventCount } }`;
const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;

/** The recording through both doors: POST /recordings (status, body) and importRecording (its first error, or the session). */
async function importBoth(events: unknown[]) {
  const text = [HEADER, ...events].map((l) => JSON.stringify(l)).join('\n') + '\n';
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: text });
  const gql = await app.gql(IMPORT, { r: text });
  return { upload: { status: res.status, body: (await res.json()) as any }, gql };
}

const opening = [
  { seq: 0, type: 'inbox/add', data: { inputId: 'i1', text: 'hi' } },
  { seq: 1, type: 'inbox/remove', data: { inputId: 'i1', reason: 'taken' } },
  { seq: 2, type: 'turn/start', data: { turn: 1, inputId: 'i1' } },
];

describe('forged synthetic events', () => {
  it.each([
    ['a title', [{ seq: 0, type: 'session/title', data: { title: 'x' }, synthetic: true }], 2],
    ['a step start', [...opening, { seq: 3, type: 'step/start', data: { turn: 1, step: 1 }, synthetic: true }], 5],
    ['an input', [{ seq: 0, type: 'inbox/add', data: { inputId: 'i1', text: 'hi' }, synthetic: true }], 2],
    [
      "a model's message",
      [
        ...opening,
        { seq: 3, type: 'step/start', data: { turn: 1, step: 1 } },
        { seq: 4, type: 'model/message', data: { turn: 1, step: 1, text: 'I was told so', toolCalls: [] }, synthetic: true },
      ],
      6,
    ],
  ])('%s marked synthetic (only repair writes synthetic events) is refused at both doors', async (_name, events, line) => {
    const before = await sessionCount();
    const { upload, gql } = await importBoth(events);
    expect(upload.status).toBe(400);
    expect(upload.body.errors[0].message).toMatch(new RegExp(`^line ${line}: synthetic closer: only repair's closers are synthetic`));
    expect(gql.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(gql.errors?.[0].message).toMatch(/synthetic closer/);
    expect(await sessionCount()).toBe(before);
  });

  it("repair's own closers still import (a crash-repaired log, exported and imported again)", async () => {
    const { upload } = await importBoth([...opening, { seq: 3, type: 'turn/end', data: { turn: 1, reason: 'interrupted' }, synthetic: true }]);
    expect(upload.status).toBe(201);
  });
});

describe('compaction instructions', () => {
  const start = (instructions: string) => ({ type: 'plugin/compaction/start', data: { reason: 'manual', fromSeq: 0, toSeq: 0, instructions } });
  const over = 'x'.repeat(MAX_COMPACTION_INSTRUCTIONS_CHARS + 1);

  it("past compactSession's limit: refused in a recording, at both doors", async () => {
    const before = await sessionCount();
    const { upload, gql } = await importBoth([{ seq: 0, ...start(over) }]);
    expect(upload.status).toBe(400);
    expect(upload.body.errors[0].message).toMatch(/^line 2: .*plugin\/compaction\/start.*instructions/);
    expect(gql.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(await sessionCount()).toBe(before);
    expect((await importBoth([{ seq: 0, ...start('x'.repeat(MAX_COMPACTION_INSTRUCTIONS_CHARS)) }])).upload.status).toBe(201);
  });

  it("past compactSession's limit: refused in a runner's batch", async () => {
    const { id } = (await app.ok(`mutation { createSession(input: {title: "c", runner: "compactors"}) { id } }`)).createSession;
    const token = (await app.ok(`mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r"}) { lease { token } } }`, { id })).claimSession.lease
      .token;
    const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`;
    const r = await app.gql(APPEND, { input: { sessionId: id, leaseToken: token, expectedEventCount: 1, events: [start(over)] } });
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(r.errors?.[0].message).toMatch(/instructions/);
    const ok = await app.gql(APPEND, { input: { sessionId: id, leaseToken: token, expectedEventCount: 1, events: [start('keep the names')] } });
    expect(ok.errors).toBeUndefined();
    expect(ok.data.appendEvents.eventCount).toBe(2);
  });
});

describe('compressed bodies', () => {
  it('a gzip body (Content-Encoding: gzip) is never inflated, at any door: no decompression bomb can get in', async () => {
    // 64 MiB of newlines in 64 KiB: refused as the bytes they are (not UTF-8), never expanded.
    const bomb = zlib.gzipSync(Buffer.alloc(64 * 2 ** 20, 0x0a), { level: 9 });
    const before = await sessionCount();
    for (const [path, type] of [
      ['/recordings', 'application/x-ndjson'],
      ['/graphql', 'application/json'],
      ['/chat', 'application/json'],
      ['/agui', 'application/json'],
    ]) {
      const res = await fetch(app.url.replace(/\/graphql$/, path), {
        method: 'POST',
        headers: { 'content-type': type, 'content-encoding': 'gzip' },
        body: bomb,
      });
      expect([path, res.status]).toEqual([path, 400]);
      expect(((await res.json()) as any).errors[0].message).toMatch(/not valid UTF-8/);
    }
    expect(await sessionCount()).toBe(before);
  });
});
