// A recording's file contents are read in pages bounded by bytes
// (store/file-blobs.ts recordingBlobs): a history names every version a file
// had, each up to the file limit, so a page of 500 of them could hold
// gigabytes while an export waited on its client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { postRecording, recordingOf, sha256 } from '../security/hostile-doors.ts';

let app: TestApp;
let contentReads = 0;
beforeAll(async () => {
  app = await startTestApp({ onQuery: (sql) => void (/SELECT hash, content FROM "FileBlob"/.test(sql) && contentReads++) });
});
afterAll(() => app?.close());

describe('recordingBlobs', () => {
  it('reads contents a page of at most pageBytes at a time (one larger content alone), and yields every one', async () => {
    const contents = Array.from({ length: 6 }, (_, i) => Buffer.alloc(100_000, 97 + i));
    const changes = contents.map((c, i) => ({ path: `f${i}.txt`, hash: sha256(c), size: c.length }));
    const posted = await postRecording(app, recordingOf(changes, contents));
    expect(posted.status).toBe(201);
    const { id, eventCount } = posted.body.session;
    const before = contentReads;
    const read: string[] = [];
    for await (const b of app.services.store.files.recordingBlobs(id, eventCount - 1, 250_000)) read.push(b.blob);
    expect(read.sort()).toEqual(changes.map((c) => c.hash).sort());
    expect(contentReads - before).toBe(3); // two 100 kB contents per 250 kB page
    const alone: string[] = [];
    for await (const b of app.services.store.files.recordingBlobs(id, eventCount - 1, 1)) alone.push(b.blob);
    expect(alone).toHaveLength(6);
    expect(contentReads - before).toBe(3 + 6);
  });
});
