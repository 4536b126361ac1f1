// Session.recording under the response limit (docs/operations.md "Limits"):
// a recording imported through POST /recordings may be gigabytes, and the
// field stops building it once it passes FORKLINE_MAX_RESPONSE_BYTES, saying
// where the whole one streams from, instead of holding it all to refuse it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const MAX = 64 * 1024;
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ security: { maxResponseBytes: MAX } });
});
afterAll(() => app?.close());

/** A recording of `n` titles of 1 KiB each, posted to POST /recordings: the new session's id. */
async function imported(n: number): Promise<string> {
  const lines = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_big', title: 'big' } }];
  for (let seq = 0; seq < n; seq++) lines.push({ seq, type: 'session/title', data: { title: `${seq} ${'t'.repeat(1000)}`.slice(0, 200) } } as never);
  const body = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
  expect(res.status).toBe(201);
  return ((await res.json()) as any).session.id;
}

describe('Session.recording', () => {
  it('past the response limit is RESPONSE_TOO_LARGE at the field, naming GET /recordings; under it, the recording', async () => {
    const big = await imported(1_000); // ~250 KB of lines
    const r = await app.gql('query($id: ID!) { session(id: $id) { id recording } }', { id: big });
    // Refused at the field (a non-null String: its session is null), not after the whole recording was built into the response.
    expect(r.data).toEqual({ session: null });
    expect(r.errors?.[0]).toMatchObject({ path: ['session', 'recording'], extensions: { code: 'RESPONSE_TOO_LARGE' } });
    expect(r.errors?.[0].message).toMatch(new RegExp(`more than ${MAX} bytes.*GET /recordings\\?session=${big} streams it`));
    const small = await imported(10);
    const ok = await app.ok('query($id: ID!) { session(id: $id) { recording } }', { id: small });
    expect(ok.session.recording.split('\n').filter(Boolean)).toHaveLength(11);
  });
});
