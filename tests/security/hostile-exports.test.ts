// What the server hands back of content from outside, at every HTTP door that
// serves it (docs/operations.md "Threat model"): a recording whose title and
// file are HTML with script, exported (GET /recordings, Session.recording),
// read as a file (Session.file) or as event pages (GET /sessions/<id>/events),
// and the errors beside them, is never a response a browser would render as a
// page: a JSON or NDJSON Content-Type with X-Content-Type-Options: nosniff,
// and a download (Content-Disposition: attachment, a filename of safe
// characters) for the recording.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { fileTurn, postRecording, recordingsUrl, sha256 } from './hostile-doors.ts';

const PAGE = Buffer.from('<!doctype html><html><body><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"></body></html>\n');
const TITLE = '"; filename="evil.html\r\nContent-Type: text/html\r\n\r\n<script>window.__pwned=1</script>';

function htmlRecording(): string {
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_html', title: TITLE } }];
  const events = [{ type: 'session/title', data: { title: TITLE } }, ...fileTurn(1, [{ path: 'index.html', hash: sha256(PAGE), size: PAGE.byteLength }])];
  events.forEach((e, seq) => lines.push({ seq, ...e }));
  lines.push({ blob: sha256(PAGE), base64: PAGE.toString('base64') });
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}

let app: TestApp;
let id: string;
let origin: string;
beforeAll(async () => {
  app = await startTestApp();
  origin = new URL(app.url).origin;
  const r = await postRecording(app, htmlRecording());
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  id = r.body.session.id;
});
afterAll(() => app?.close());

/** A response no browser renders as a page: not HTML (nor XML/SVG), and not sniffed into one. */
function notAPage(res: Response, what: string) {
  expect(res.headers.get('content-type'), what).toMatch(/^application\/(json|graphql-response\+json|x-ndjson)(;|$)/);
  expect(res.headers.get('x-content-type-options'), what).toBe('nosniff');
}

describe('content from outside served over HTTP', () => {
  it('GET /recordings: an NDJSON download with a safe filename, not sniffed', async () => {
    const res = await fetch(`${recordingsUrl(app)}?session=${id}`);
    expect(res.status).toBe(200);
    notAPage(res, 'GET /recordings');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="[A-Za-z0-9._-]+\.jsonl"$/);
    expect(await res.text()).toContain(PAGE.toString('base64'));
  });

  it('Session.recording and Session.file over POST and GET /graphql, and GET /sessions/<id>/events: JSON, not sniffed', async () => {
    const query = `query($id: ID!) { session(id: $id) { title recording file(path: "index.html") { text } } }`;
    const post = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables: { id } }) });
    notAPage(post, 'POST /graphql');
    const body = (await post.json()) as { data: { session: { title: string; file: { text: string } } } };
    expect(body.data.session.file.text).toBe(PAGE.toString());
    expect(body.data.session.title).toBe(TITLE);

    const url = new URL(app.url);
    url.searchParams.set('query', query);
    url.searchParams.set('variables', JSON.stringify({ id }));
    const get = await fetch(url, { headers: { 'x-graphql-yoga-csrf': '1' } });
    expect(get.status).toBe(200);
    notAPage(get, 'GET /graphql');

    const page = await fetch(`${origin}/sessions/${id}/events`);
    expect(page.status).toBe(200);
    notAPage(page, 'GET /sessions/<id>/events');
  });

  it('the errors beside them are not sniffed either', async () => {
    const noSession = await fetch(recordingsUrl(app));
    expect(noSession.status).toBe(400);
    notAPage(noSession, 'GET /recordings without a session');
    const missing = await fetch(`${recordingsUrl(app)}?session=${encodeURIComponent('<script>x</script>')}`);
    expect(missing.status).toBe(404);
    notAPage(missing, 'GET /recordings of no session');
    const refused = await fetch(recordingsUrl(app), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: '<html>\n' });
    expect(refused.status).toBe(400);
    notAPage(refused, 'POST /recordings of HTML');
  });

  it("/graphql's refusals and errors are not sniffed: the guard's, yoga's and the fast lane's", async () => {
    const post = (body: string | Uint8Array<ArrayBuffer>) => fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const tooLarge = await post(JSON.stringify({ query: `{ __typename } # ${'<script>'.repeat(2_300_000)}` }));
    expect(tooLarge.status).toBe(413);
    notAPage(tooLarge, 'POST /graphql over the body limit');
    const notUtf8 = await post(new Uint8Array([0x7b, 0xff, 0x7d]));
    expect(notUtf8.status).toBe(400);
    notAPage(notUtf8, 'POST /graphql of invalid UTF-8');
    const syntax = await post(JSON.stringify({ query: '{ <script>' }));
    expect(((await syntax.clone().json()) as { errors?: unknown[] }).errors?.length).toBeGreaterThan(0);
    notAPage(syntax, 'POST /graphql that does not parse (yoga)');
    const failed = await post(JSON.stringify({ query: '{ sessions(first: 100000) { edges { node { id } } } }' }));
    expect(((await failed.clone().json()) as { errors?: unknown[] }).errors?.length).toBeGreaterThan(0);
    notAPage(failed, 'POST /graphql whose execution errs (the fast lane)');
  });
});
