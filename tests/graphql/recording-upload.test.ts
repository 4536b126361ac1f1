// POST /recordings: a recording streamed as the request body (for large ones).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { MALFORMED, longRecordingLines, readFixture } from '../fixtures/recordings/recordings.ts';

let app: TestApp;
let authed: TestApp;
const TOKEN = 'tenant-a-token-0123456789';
beforeAll(async () => {
  app = await startTestApp({ security: { maxRecordingBytes: 64 * 2 ** 20 } });
  authed = await startTestApp({ security: { apiTokens: new Map([[TOKEN, 'tenant-a']]) } });
});
afterAll(async () => {
  await app.close();
  await authed.close();
});

const uploadUrl = (a: TestApp) => a.url.replace(/\/graphql$/, '/recordings');
async function upload(a: TestApp, body: BodyInit, headers: Record<string, string> = {}) {
  const res = await fetch(uploadUrl(a), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson', ...headers },
    body,
    duplex: 'half',
  } as RequestInit);
  return { status: res.status, body: (await res.json()) as any };
}
/** Posts `mb` megabytes of one long line with raw node:http (fetch cannot send a lying content-length). */
function rawPost(url: string, headers: Record<string, string>, mb: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/x-ndjson', ...headers } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    const chunk = Buffer.alloc(2 ** 20, 'x');
    let sent = 0;
    const pump = () => {
      while (sent < mb) {
        sent++;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}
const sessionCount = async (a: TestApp) => (await a.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;
const eventCount = async (a: TestApp) => (await a.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Event"')).rows[0].n;

describe('POST /recordings', () => {
  it('imports a streamed recording exactly like the importRecording mutation', async () => {
    const text = readFixture('v4-completed-tools.jsonl');
    // Streamed in small chunks that split lines (and a multi-byte character) anywhere.
    const bytes = new TextEncoder().encode(text);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 37) controller.enqueue(bytes.slice(i, i + 37));
        controller.close();
      },
    });
    const streamed = await upload(app, stream);
    expect(streamed.status).toBe(201);
    const viaGraphQL = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id eventCount } }`, { r: text })).importRecording;
    expect(streamed.body.session).toMatchObject({ eventCount: viaGraphQL.eventCount, formatVersion: 4 });
    const recording = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id })).session.recording as string;
    expect((await recording(streamed.body.session.id)).replace(streamed.body.session.id, 'X')).toBe(
      (await recording(viaGraphQL.id)).replace(viaGraphQL.id, 'X'),
    );
  });

  describe('a large recording (100k events, streamed in parts)', () => {
    const lines = longRecordingLines(100_000, 'bulk');
    const events = lines.length - 1;
    const streamOf = (text: string) => Readable.toWeb(Readable.from(Buffer.from(text), { objectMode: false })) as ReadableStream;

    it('is stored whole: every event, its counters, its pending inputs, its search vectors', async () => {
      const r = await upload(app, streamOf(`${lines.join('\n')}\n`));
      expect(r.status).toBe(201);
      expect(r.body.session).toMatchObject({ eventCount: events, title: 'bulk', formatVersion: 4 });
      const id = r.body.session.id;
      const { rows } = await app.db.pool.query(
        `SELECT count(*)::int AS n, min(seq) AS first, max(seq) AS last, sum("pendingInputCount")::int AS pending,
                count(*) FILTER (WHERE "searchVector" IS NOT NULL)::int AS searchable, count(*) FILTER (WHERE "treeId" <> "sessionId")::int AS elsewhere
           FROM "Event" WHERE "sessionId" = $1`,
        [id],
      );
      // One pending input between each turn's inbox/add and inbox/remove; inputs and answers are searchable.
      expect(rows[0]).toEqual({ n: events, first: 0, last: events - 1, pending: events / 7, searchable: (2 * events) / 7, elsewhere: 0 });
      const session = (await app.ok(`query($id: ID!) { session(id: $id) { eventCount turnCount status } }`, { id })).session;
      expect(session).toEqual({ eventCount: events, turnCount: events / 7, status: 'IDLE' });
      const [last] = await app.services.store.log.page(id, events - 2, 1);
      expect(last).toMatchObject({ seq: events - 1, type: 'turn/end', data: JSON.parse(lines[events]).data });
    });

    it('is rejected whole, naming the line and its rule, when one event in the middle breaks a rule', async () => {
      const [sessionsBefore, eventsBefore] = [await sessionCount(app), await eventCount(app)];
      const bad = 70_001; // a tool result for a call no step made, after 70,000 valid events
      const broken = lines.map((l, i) =>
        i === bad - 1
          ? JSON.stringify({
              ...JSON.parse(l),
              type: 'tool/result',
              data: { turn: 1, step: 1, callId: 'call_nope', resultId: 'r', status: 'ok', content: 'x', name: 'n' },
            })
          : l,
      );
      const r = await upload(app, streamOf(`${broken.join('\n')}\n`));
      expect(r.status).toBe(400);
      expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(r.body.errors[0].message).toMatch(new RegExp(`^line ${bad}: result pairing: `));
      expect([await sessionCount(app), await eventCount(app)]).toEqual([sessionsBefore, eventsBefore]);
    });
  });

  it('repairs a crashed recording once, like the mutation', async () => {
    const r = await upload(app, readFixture('v3-crashed.jsonl'));
    expect(r.status).toBe(201);
    const events = await app.services.store.log.page(r.body.session.id, -1, 100_000);
    expect(events.slice(-1)[0]).toMatchObject({ type: 'turn/end', synthetic: true, data: { reason: 'interrupted' } });
  });

  it.each(MALFORMED.map((m) => [m.name, m] as const))('rejects %s with its line, writing nothing', async (_name, m) => {
    const before = await sessionCount(app);
    const r = await upload(app, m.text);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toContain(`line ${m.line}`);
    expect(await sessionCount(app)).toBe(before);
  });

  it('refuses other methods, CORS-simple content types (CSRF) and oversized bodies', async () => {
    // GET is the export (recording-download.ts), which needs a session.
    expect((await fetch(uploadUrl(app))).status).toBe(400);
    expect((await fetch(uploadUrl(app), { method: 'PUT', body: '' })).status).toBe(405);
    const plain = await upload(app, readFixture('v4-completed-tools.jsonl'), { 'content-type': 'text/plain' });
    expect(plain.status).toBe(415);
    const crossSite = await upload(app, readFixture('v4-completed-tools.jsonl'), { origin: 'https://evil.example' });
    expect(crossSite.status).toBe(403);
  });

  it('refuses a recording over its limit (FORKLINE_MAX_RECORDING_BYTES, here 64 MB), announced or streamed, and writes nothing', async () => {
    const before = await sessionCount(app);
    expect(await rawPost(uploadUrl(app), { 'content-length': String(65 * 2 ** 20) }, 1)).toBe(413);
    expect(await rawPost(uploadUrl(app), { 'transfer-encoding': 'chunked' }, 65)).toBe(413);
    // A client that sends its whole announced body (fetch does) reads the 413, not a broken pipe.
    const big = await upload(app, Buffer.alloc(65 * 2 ** 20, 'x'));
    expect(big.status).toBe(413);
    expect(big.body.errors[0].message).toMatch(/limited to 67108864 bytes/);
    expect(await sessionCount(app)).toBe(before);
  });

  it('refuses an upload that would pass the spool quota (FORKLINE_UPLOAD_SPOOL_MAX_BYTES) with 503, and frees its share', async () => {
    const small = await startTestApp({ security: { uploadSpoolMaxBytes: 4096 } });
    try {
      const header = `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_spool' } })}\n`;
      const events = Array.from({ length: 100 }, (_, seq) => JSON.stringify({ seq, type: 'session/title', data: { title: `title ${seq}` } })).join('\n');
      const refused = await upload(small, `${header}${events}\n`);
      expect(refused.status).toBe(503);
      expect(refused.body.errors[0]).toMatchObject({ extensions: { code: 'SERVICE_UNAVAILABLE' } });
      expect(refused.body.errors[0].message).toMatch(/uploads in progress would spool more than 4096 bytes \(FORKLINE_UPLOAD_SPOOL_MAX_BYTES\)/);
      // What it had spooled is free again: a small one fits.
      expect((await upload(small, header)).status).toBe(201);
    } finally {
      await small.close();
    }
  });

  it('rejects invalid UTF-8 naming its line, instead of storing U+FFFD', async () => {
    const lines = readFixture('v4-completed-tools.jsonl').split('\n');
    const [head, bad] = [Buffer.from(lines.slice(0, 4).join('\n') + '\n'), Buffer.from(lines[4])];
    const invalid = Buffer.concat([head, bad.subarray(0, 60), Buffer.from([0xc3, 0x28]), bad.subarray(60), Buffer.from('\n' + lines.slice(5).join('\n'))]);
    const r = await upload(app, invalid);
    expect(r.status).toBe(400);
    expect(r.body.errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    expect(r.body.errors[0].message).toMatch(/^line 5: encoding: the line is not valid UTF-8/);
  });

  it('spools under its upload folder and removes what a killed process left there at start', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-spool-'));
    const dead = path.join(dir, `99999999-${'0'.repeat(8)}-0000-0000-0000-000000000000.jsonl`);
    const mine = path.join(dir, `${process.pid}-${'1'.repeat(8)}-0000-0000-0000-000000000000.jsonl`);
    const other = path.join(dir, 'notes.txt');
    for (const f of [dead, mine, other]) fs.writeFileSync(f, 'x');
    const spooling = await startTestApp({ uploadDir: dir });
    try {
      expect(fs.existsSync(dead)).toBe(false);
      expect(fs.existsSync(mine)).toBe(true); // a live process's upload in progress
      expect(fs.existsSync(other)).toBe(true);
      const ok = await upload(spooling, readFixture('v4-completed-tools.jsonl'));
      expect(ok.status).toBe(201);
      expect(fs.readdirSync(dir).sort()).toEqual([path.basename(mine), 'notes.txt'].sort()); // its own spool file is gone
    } finally {
      await spooling.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a cancelled upload leaves nothing: the client goes mid-body, its spool file goes and no session is written', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-spool-'));
    const spooling = await startTestApp({ uploadDir: dir });
    try {
      const sessions = await sessionCount(spooling);
      const lines = longRecordingLines(20_000);
      const head = Buffer.from(lines.slice(0, 10_000).join('\n') + '\n');
      const req = http.request(uploadUrl(spooling), { method: 'POST', agent: false, headers: { 'content-type': 'application/x-ndjson' } });
      req.on('error', () => {}); // destroyed on purpose
      req.write(head);
      // The server is spooling it (the file is there and growing), then the client goes.
      await expect.poll(() => fs.readdirSync(dir).length, { timeout: 10_000 }).toBe(1);
      const spool = path.join(dir, fs.readdirSync(dir)[0]);
      await expect.poll(() => fs.statSync(spool, { throwIfNoEntry: false })?.size ?? 0, { timeout: 10_000 }).toBeGreaterThan(0);
      req.destroy();
      await expect.poll(() => fs.readdirSync(dir), { timeout: 10_000 }).toEqual([]);
      expect(await sessionCount(spooling)).toBe(sessions);
      // Its upload slot is free again: the next upload imports.
      const ok = await upload(spooling, readFixture('v4-completed-tools.jsonl'));
      expect(ok.status).toBe(201);
      expect(await sessionCount(spooling)).toBe(sessions + 1);
    } finally {
      await spooling.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an import the uploader left after sending it all rolls back, however far it got', async () => {
    const sessions = await sessionCount(app);
    const events = await eventCount(app);
    const gone = new AbortController();
    const lines = longRecordingLines(3_000);
    // The client goes while the import is reading line 2,000 (its body was all spooled).
    async function* source() {
      for (const [i, line] of lines.entries()) {
        if (i === 2_000) gone.abort(new Error('the client closed the upload'));
        yield `${line}\n`;
      }
    }
    await expect(app.services.controller.importRecording({ tenant: 'local' }, source, {}, { signal: gone.signal })).rejects.toThrow(
      'the client closed the upload',
    );
    expect(await sessionCount(app)).toBe(sessions);
    expect(await eventCount(app)).toBe(events);
    // Aborted after the last line, right before its commit: rolled back too.
    const late = new AbortController();
    await expect(
      app.services.controller.importRecording(
        { tenant: 'local' },
        async function* () {
          for (const line of lines) yield `${line}\n`;
          late.abort(new Error('gone at the end'));
        },
        {},
        { signal: late.signal },
      ),
    ).rejects.toThrow('gone at the end');
    expect(await sessionCount(app)).toBe(sessions);
    expect(await eventCount(app)).toBe(events);
  });

  it('needs the tenant token when auth is on, and imports into that tenant', async () => {
    const denied = await upload(authed, readFixture('v4-completed-tools.jsonl'));
    expect(denied.status).toBe(401);
    expect(denied.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
    const ok = await upload(authed, readFixture('v4-completed-tools.jsonl'), { authorization: `Bearer ${TOKEN}` });
    expect(ok.status).toBe(201);
    const { rows } = await authed.db.pool.query('SELECT tenant FROM "Session" WHERE id = $1', [ok.body.session.id]);
    expect(rows[0].tenant).toBe('tenant-a');
  });
});
