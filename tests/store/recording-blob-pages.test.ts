// A recording's file contents are read in pages bounded by bytes
// (store/file-blobs.ts recordingBlobs): a history names every version a file
// had, each up to the file limit, so a page of 500 of them could hold
// gigabytes while an export waited on its client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { postRecording, recordingOf, sha256 } from '../security/hostile-doors.ts';
import { BLOB_BATCH_BYTES, BLOB_BATCH_SIZE } from '../../src/store/recordings.ts';

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

describe('an import of many file contents', () => {
  it('writes them one batch at a time, each of at most BLOB_BATCH_SIZE contents and BLOB_BATCH_BYTES of base64 (plus the line that passed it)', async () => {
    // 150 contents of 60 kB (12 MB of base64): the whole recording would be 3 batches' bytes at once.
    const contents = Array.from({ length: 150 }, (_, i) => Buffer.alloc(60_000, i));
    const changes = contents.map((c, i) => ({ path: `f${i}.bin`, hash: sha256(c), size: c.length }));
    const line = Buffer.from(contents[0]).toString('base64').length;
    const files = app.services.store.files;
    const putFromRecording = files.putFromRecording;
    const batches: Array<{ contents: number; base64: number; inFlight: number }> = [];
    let inFlight = 0;
    files.putFromRecording = async (...args: Parameters<typeof putFromRecording>) => {
      inFlight++;
      batches.push({ contents: args[1].length, base64: args[1].reduce((n, b) => n + b.base64.length, 0), inFlight });
      try {
        return await putFromRecording.apply(files, args);
      } finally {
        inFlight--;
      }
    };
    let posted;
    try {
      posted = await postRecording(app, recordingOf(changes, contents));
    } finally {
      files.putFromRecording = putFromRecording;
    }
    expect(posted.status).toBe(201);
    expect(batches.reduce((n, b) => n + b.contents, 0)).toBe(150);
    expect(batches.filter((b) => b.contents > 0).length).toBeGreaterThanOrEqual(3);
    for (const b of batches) {
      expect(b.inFlight).toBe(1); // the next batch is read only once this one is written
      expect(b.contents).toBeLessThanOrEqual(BLOB_BATCH_SIZE);
      expect(b.base64).toBeLessThan(BLOB_BATCH_BYTES + line);
    }
  });
});
