import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { FIXTURES, MALFORMED, fixtureUrl, longRecordingLines, notStartedLog, readFixture } from '../fixtures/recordings/recordings.ts';
import { importRecording as importFrom } from '../../src/store/recordings.ts';
import { MAX_RECORDING_BYTES, MAX_RECORDING_LINE_BYTES } from '../../src/core/recording.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const IMPORT = `mutation($recording: String!) { importRecording(recording: $recording) {
  id title status formatVersion eventCount turnCount parent { id } forkedAtSeq inheritedEventCount firstLiveSeq } }`;
const RECORDING = `query($id: ID!) { session(id: $id) { recording } }`;

const importRecording = async (recording: string) => (await app.ok(IMPORT, { recording })).importRecording;
const exportRecording = async (id: string): Promise<string> => (await app.ok(RECORDING, { id })).session.recording;
const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;
const eventCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Event"')).rows[0].n;
const parseLines = (text: string) =>
  text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('recordings over HTTP', () => {
  it.each(FIXTURES)('%s: export → import → export is identical except the session id', async (name) => {
    const first = await importRecording(readFixture(name));
    const exported = await exportRecording(first.id);
    const second = await importRecording(exported);
    const again = await exportRecording(second.id);
    expect(second.id).not.toBe(first.id);
    expect(again).toBe(exported.replace(first.id, second.id));
    const [header] = parseLines(exported);
    expect(header).toEqual({ format: 'forkline.recording', version: 4, session: { id: first.id, title: first.title } });
  });

  it('a completed V3 recording keeps every event and becomes format V4', async () => {
    const text = readFixture('v3-completed.jsonl');
    const s = await importRecording(text);
    expect(s).toMatchObject({ formatVersion: 4, eventCount: 28, turnCount: 2, status: 'IDLE', title: 'Clock and notes', parent: null, forkedAtSeq: null });
    const [header, ...events] = parseLines(await exportRecording(s.id));
    expect(header.version).toBe(4);
    expect(events).toEqual(parseLines(text).slice(1));
  });

  it('a forked child keeps its fork counters and its original not-started result', async () => {
    const s = await importRecording(readFixture('v4-nested-fork.jsonl'));
    expect(s).toMatchObject({ parent: null, forkedAtSeq: 17, inheritedEventCount: 18, firstLiveSeq: 22, turnCount: 2 });
    const events = parseLines(await exportRecording(s.id)).slice(1);
    expect(events.find((e) => e.seq === 19).data).toMatchObject({ status: 'not-started', resultId: 'forked:ses_fixturev4child@17:call_v4c_3' });
  });

  it('a not-started result is rejected as V3 and the same log accepted as V4', async () => {
    const before = await sessionCount();
    const r = await app.gql(IMPORT, { recording: notStartedLog(3) });
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(r.errors?.[0].message).toMatch(/^line 18: codec: /);
    expect(await sessionCount()).toBe(before);
    const s = await importRecording(notStartedLog(4));
    expect(s).toMatchObject({ formatVersion: 4, eventCount: 19, status: 'IDLE' });
  });

  it.each(MALFORMED)('$name: BAD_USER_INPUT naming line $line, nothing written', async ({ text, line, rule }) => {
    const before = await sessionCount();
    const r = await app.gql(IMPORT, { recording: text });
    expect(r.data).toBeNull();
    expect(r.errors).toHaveLength(1);
    expect(r.errors![0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', line, rule });
    expect(r.errors![0].message.startsWith(`line ${line}: ${rule}: `)).toBe(true);
    expect(await sessionCount()).toBe(before);
  });

  it('a crashed V3 recording gets its interrupted closers once', async () => {
    const s = await importRecording(readFixture('v3-crashed.jsonl'));
    expect(s).toMatchObject({ eventCount: 19, status: 'IDLE', turnCount: 2, formatVersion: 4 });
    const exported = await exportRecording(s.id);
    const closers = parseLines(exported).slice(17);
    expect(closers.map((e) => [e.seq, e.type, e.synthetic, e.data.status ?? e.data.reason])).toEqual([
      [16, 'tool/result', true, 'interrupted'],
      [17, 'step/end', true, 'interrupted'],
      [18, 'turn/end', true, 'interrupted'],
    ]);
    expect(closers[0].data).toMatchObject({ callId: 'call_v3x_3', resultId: `interrupted:${s.id}:call_v3x_3` });
    expect(closers[0].data.content).toMatch(/interrupted.*"note_write" has side effects/);
    // The repaired log is closed: importing it again adds nothing.
    expect((await importRecording(exported)).eventCount).toBe(19);
  });

  it('imports and exports a large recording (50k events)', async () => {
    const lines = longRecordingLines(50_000);
    const text = `${lines.join('\n')}\n`;
    expect(text.length).toBeGreaterThan(4_000_000);
    const s = await importRecording(text);
    expect(s).toMatchObject({ eventCount: lines.length - 1, turnCount: (lines.length - 1) / 7, status: 'IDLE' });
    const exported = parseLines(await exportRecording(s.id));
    expect(exported).toHaveLength(lines.length);
    expect(exported[exported.length - 1]).toMatchObject(JSON.parse(lines[lines.length - 1]));
  });
});

describe('importRecording from a re-readable source', () => {
  const scope = { tenant: 'local' };

  it('reads the recording once, in small chunks', async () => {
    let opened = 0;
    const open = () => (opened++, fs.createReadStream(fixtureUrl('v4-forked-child.jsonl'), { encoding: 'utf8', highWaterMark: 97 }));
    const s = await importFrom(app.services.store, scope, open);
    expect(s).toMatchObject({ eventCount: 24, forkedAtSeq: 6, inheritedEventCount: 7, firstLiveSeq: 11, formatVersion: 4 });
    expect(opened).toBe(1);
  });

  it('writes nothing when a later line breaks a rule', async () => {
    const [before, eventsBefore] = [await sessionCount(), await eventCount()];
    const [head, ...rest] = readFixture('v4-completed-tools.jsonl').trimEnd().split('\n');
    const err = await importFrom(app.services.store, scope, async function* () {
      yield `${[head, ...rest].join('\n')}\n`;
      yield `${JSON.stringify({ seq: rest.length + 5, type: 'session/title', data: { title: 'late' } })}\n`;
    }).catch((e: unknown) => e);
    expect((err as Error).message).toBe(`line ${rest.length + 2}: seq order: expected seq ${rest.length}, got ${rest.length + 5}`);
    expect([await sessionCount(), await eventCount()]).toEqual([before, eventsBefore]);
  });

  it(`rejects more than ${MAX_RECORDING_BYTES / 2 ** 20} MB as soon as it has read that much`, async () => {
    let chunks = 0;
    const err = await importFrom(
      app.services.store,
      scope,
      async function* () {
        yield `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_big' } })}\n`;
        for (;;) {
          chunks++;
          yield 'x'.repeat(2 ** 20);
        }
      },
      { maxLineBytes: Infinity },
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe(`line 2: size: the recording exceeds the size limit of ${MAX_RECORDING_BYTES} bytes`);
    expect(chunks).toBe(64);
  });

  it(`rejects a line longer than ${MAX_RECORDING_LINE_BYTES / 2 ** 20} MB as soon as it has read that much`, async () => {
    let chunks = 0;
    const err = await importFrom(app.services.store, scope, async function* () {
      yield `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_big' } })}\n`;
      for (;;) {
        chunks++;
        yield 'x'.repeat(2 ** 20);
      }
    }).catch((e: unknown) => e);
    expect((err as Error).message).toBe(
      `line 2: size: a line is longer than the limit of ${MAX_RECORDING_LINE_BYTES} bytes per line (FORKLINE_MAX_RECORDING_LINE_BYTES)`,
    );
    expect(chunks).toBe(MAX_RECORDING_LINE_BYTES / 2 ** 20 + 1);
  });
});
