// A whole history of file change sets is read a page at a time (store/file-blobs.ts
// adoptNamed and recordingBlobs, store/session-log.ts fileChangeSetPages): an
// import's check of the contents its change sets name, and their adoption, and
// an export's contents. Tiny pages here, so a history spans many: a page left
// out would leave a foreign content unrefused, a named one unadopted, or a
// content missing from the recording.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lineOfSeq } from '../../src/core/recording.ts';
import { FILES_CHANGE, type FileChangeRecord } from '../../src/core/file-tree.ts';
import { importRecording } from '../../src/store/recordings.ts';
import { ForklineError } from '../../src/core/errors.ts';
import type { TestApp } from '../helpers/app.ts';
import { fileCallEvents } from '../helpers/file-calls.ts';
import { B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { postRecording, recordingOf, sha256 } from '../security/hostile-doors.ts';

let app: TestApp;
const alpha = { tenant: 'alpha' };
const TURNS = 7;
/** One content per turn; turn 7 names the first again (a hash named on two pages). */
const contents = Array.from({ length: TURNS }, (_, i) => Buffer.from(`content of turn ${i + 1}`));
const change = (c: Buffer, path: string): FileChangeRecord => ({ path, hash: sha256(c), size: c.length });
const foreign = Buffer.from('only tenant beta holds this');

/** A recording of TURNS file turns, turn t naming `named(t)`, carrying `carried`. */
function historyOf(named: (turn: number) => FileChangeRecord[], carried: Buffer[] = []): string {
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_pages', title: 'pages' } }];
  for (let t = 1; t <= TURNS; t++) for (const e of fileCallEvents(t, named(t))) lines.push({ seq: lines.length - 1, ...e });
  for (const b of carried) lines.push({ blob: sha256(b), base64: b.toString('base64') });
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}
const ownNames = (t: number) =>
  t === TURNS ? [change(contents[t - 1], `f${t}.txt`), change(contents[0], 'again.txt')] : [change(contents[t - 1], `f${t}.txt`)];
/** Seq of turn t's change set (fileCallEvents: the sixth of the turn's nine events). */
const changeSetSeq = (t: number) => (t - 1) * 9 + fileCallEvents(t, []).findIndex((e) => e.type === FILES_CHANGE);

const PAGES = [
  { pageSize: 2, pageBytes: 1024 * 1024 },
  { pageSize: 100, pageBytes: 1 },
];
let carrier: { id: string; eventCount: number };

beforeAll(async () => {
  // Exactly the contents one history names may be named without carrying them.
  app = await startTwoTenantApp({ maxNamedFileHashes: TURNS });
  // Tenant beta holds `foreign`; alpha holds every content of `contents` through a session that carried them.
  expect((await postRecording(app, recordingOf([change(foreign, 'x.txt')], [foreign]), B)).status).toBe(201);
  carrier = await importRecording(app.services.store, alpha, historyOf(ownNames, contents));
});
afterAll(() => app?.close());

const adopted = async (sessionId: string) =>
  (await app.db.pool.query<{ hash: string }>('SELECT hash FROM "SessionBlob" WHERE "sessionId" = $1 ORDER BY hash', [sessionId])).rows.map((r) => r.hash);

describe('an import checks and adopts its named contents page by page', () => {
  it.each(PAGES)('adopts every content named on every page (%o)', async (page) => {
    const s = await importRecording(app.services.store, alpha, historyOf(ownNames), { changeSetPage: page });
    expect(await adopted(s.id)).toEqual(contents.map((c) => sha256(c)).sort());
  });

  it.each(PAGES)('refuses a foreign content named only on the last page, naming its line (%o)', async (page) => {
    const named = (t: number) => (t === TURNS ? [change(foreign, 'x.txt')] : ownNames(t));
    const err = await importRecording(app.services.store, alpha, historyOf(named), { changeSetPage: page }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ForklineError);
    expect((err as ForklineError).code).toBe('BAD_USER_INPUT');
    const seq = changeSetSeq(TURNS);
    expect((err as Error).message).toBe(
      `line ${lineOfSeq(seq)}: the change set at seq ${seq} names file content ${sha256(foreign)} for "x.txt", which it does not carry and this tenant does not hold`,
    );
  });

  it.each(PAGES)('answers with the count of every page past the cap first, before a foreign content on an earlier page (%o)', async (page) => {
    const nobodys = [Buffer.from('held by nobody 1'), Buffer.from('held by nobody 2')];
    const named = (t: number) => [
      ...ownNames(t),
      ...(t === 2 ? [change(foreign, 'x.txt')] : []),
      ...(t === TURNS ? nobodys.map((c, i) => change(c, `n${i}.txt`)) : []),
    ];
    const err = await importRecording(app.services.store, alpha, historyOf(named), { changeSetPage: page }).catch((e: unknown) => e);
    expect((err as ForklineError).code).toBe('BAD_USER_INPUT');
    expect((err as Error).message).toBe(
      `change sets may name at most ${TURNS} distinct file contents per request without carrying them (FORKLINE_MAX_NAMED_FILE_HASHES), these name ${TURNS + 3}`,
    );
  });
});

describe('an export names each content once, however few names it holds at a time', () => {
  it.each([1, 2, 3, 100])('yields every content once, in hash order (at most %i names held)', async (maxHashes) => {
    const read: string[] = [];
    for await (const b of app.services.store.files.recordingBlobs(carrier.id, carrier.eventCount - 1, undefined, undefined, {
      maxHashes,
      page: PAGES[0],
    }))
      read.push(b.blob);
    expect(read).toEqual(contents.map((c) => sha256(c)).sort());
  });
});
