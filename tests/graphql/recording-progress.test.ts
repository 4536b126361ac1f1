// POST /recordings with `Accept: application/x-ndjson`: a long import answers
// with its progress as it checks and writes the spooled recording, then its
// outcome as the last line. Before, a 200,000-event recording spooled in a
// second and then imported for 14–30 s with nothing for its uploader to show
// but "importing…" (the dashboard) or nothing at all (the CLI).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { longRecordingLines } from '../fixtures/recordings/recordings.ts';

/** Long enough that its import outlasts a progress interval (250 ms) on any machine: about 2.5 MB. */
const EVENTS = 30_000;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;

/** Posts `text` asking for progress: the status, content type, and the answer's JSON lines as they came. */
async function uploadWithProgress(text: string, accept = 'application/x-ndjson, application/json') {
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson', accept },
    body: text,
  });
  const body = await res.text();
  return { status: res.status, type: res.headers.get('content-type') ?? '', body };
}
const linesOf = (body: string) =>
  body
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

type Progress = { bytes: number; totalBytes: number; lines: number };

/** The progress lines: each within the recording, none going back. */
function expectRising(progress: Progress[], totalBytes: number) {
  expect(progress.length).toBeGreaterThan(0);
  for (const p of progress) {
    expect(p.totalBytes).toBe(totalBytes);
    expect(p.bytes).toBeLessThanOrEqual(totalBytes);
  }
  for (let i = 1; i < progress.length; i++) {
    expect(progress[i].bytes).toBeGreaterThanOrEqual(progress[i - 1].bytes);
    expect(progress[i].lines).toBeGreaterThanOrEqual(progress[i - 1].lines);
  }
}

describe('POST /recordings: the import’s progress', () => {
  it('streams progress lines while a long import runs, then the new session as the last line', async () => {
    const lines = longRecordingLines(EVENTS, 'watched import');
    const text = `${lines.join('\n')}\n`;
    const r = await uploadWithProgress(text);
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/x-ndjson/);
    const answer = linesOf(r.body);
    const progress = answer.slice(0, -1).map((l) => l.progress as Progress);
    expectRising(progress, Buffer.byteLength(text));
    const last = answer.at(-1);
    expect(last).toMatchObject({ status: 201, session: { eventCount: lines.length - 1, title: 'watched import' } });
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: last.session.id });
    expect(session.eventCount).toBe(lines.length - 1);
  }, 120_000);

  it('a bad last line after many good ones: progress, then the error naming its line as the last line; nothing imported', async () => {
    const before = await sessionCount();
    const lines = longRecordingLines(EVENTS, 'bad at the end');
    const n = lines.length - 1;
    lines.push(JSON.stringify({ seq: n, type: 'turn/end', data: { turn: 999_999, reason: 'completed' } }));
    const text = `${lines.join('\n')}\n`;
    const r = await uploadWithProgress(text);
    expect(r.status).toBe(200);
    const answer = linesOf(r.body);
    expectRising(
      answer.slice(0, -1).map((l) => l.progress as Progress),
      Buffer.byteLength(text),
    );
    const last = answer.at(-1);
    expect(last.status).toBe(400);
    expect(last.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(last.errors[0].message).toMatch(new RegExp(`^line ${lines.length}: turn bracket: turn/end of turn 999999`));
    expect(await sessionCount()).toBe(before);
  }, 120_000);

  it('without asking (no application/x-ndjson in Accept), the answer is as before: 201 and one JSON object', async () => {
    const lines = longRecordingLines(EVENTS, 'not watched');
    const r = await uploadWithProgress(`${lines.join('\n')}\n`, 'application/json');
    expect(r.status).toBe(201);
    expect(r.type).toMatch(/^application\/json/);
    expect(JSON.parse(r.body).session.eventCount).toBe(lines.length - 1);
  }, 120_000);
});
