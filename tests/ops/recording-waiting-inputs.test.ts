// A recording whose inputs are never taken (inbox/add lines, no turn) through
// POST /recordings of a service process with a capped JavaScript heap. The
// validator held every waiting input's text until the end of the upload: 150 MB
// of them (3,000 inputs of 50 kB) ran a service capped at 96 MB out of memory,
// where a 1,000,000-event recording of 130 MB imported in the same cap. It holds
// their ids only, and a recording may queue at most 64 MiB of text
// (docs/contract.md#formats): the process that runs the session holds its
// waiting inputs afterwards. The session is a runner pool's, so this process's
// agent leaves its inbox alone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PENDING_INPUT_BYTES } from '../../src/core/log-state.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';

/** The service's old-space limit (MB): well below what the waiting texts hold. */
const HEAP_CAP_MB = 96;
const MiB = 2 ** 20;

let service: ServiceProcess;

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  service = await startService({ env: { DATABASE_URL: databaseUrl, FORKLINE_API_TOKENS: undefined, NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}` } });
}, 120_000);
afterAll(async () => {
  await service?.stop();
});

/** A runner pool's recording: a title, then `count` inputs of `bytes` each, none taken; streamed a line at a time. */
function waitingInputs(count: number, bytes: number): ReadableStream<Uint8Array> {
  const text = 'q'.repeat(bytes);
  let seq = 0;
  const encoder = new TextEncoder();
  return new ReadableStream({
    pull(controller) {
      if (seq === 0) {
        controller.enqueue(encoder.encode(`${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_waiting', runner: 'pool' } })}\n`));
        controller.enqueue(encoder.encode(`${JSON.stringify({ seq: seq++, type: 'session/title', data: { title: 'waiting inputs' } })}\n`));
      } else if (seq <= count)
        controller.enqueue(encoder.encode(`${JSON.stringify({ seq: seq, type: 'inbox/add', data: { inputId: `in_${seq++}`, text } })}\n`));
      else controller.close();
    },
  });
}

const upload = (body: ReadableStream<Uint8Array>) =>
  fetch(service.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body,
    duplex: 'half',
  } as RequestInit);

describe('a recording of inputs never taken, into a service with a capped heap', () => {
  it('imports with their texts not held, and one queuing more than the bound is refused naming its line', async () => {
    // 63 MiB of waiting texts, just under the bound: the heap cap is 96 MB.
    const count = Math.floor(MAX_PENDING_INPUT_BYTES / MiB) - 1;
    const res = await upload(waitingInputs(count, MiB));
    const body = (await res.json()) as { session?: { id: string; eventCount: number } };
    expect(res.status).toBe(201);
    expect(body.session).toMatchObject({ eventCount: 1 + count });

    const over = await upload(waitingInputs(count + 2, MiB));
    const refused = (await over.json()) as { errors: Array<{ message: string; extensions: Record<string, unknown> }> };
    expect(over.status).toBe(400);
    // 64 inputs of 1 MiB are the bound itself; the 65th (seq count + 2: the header is line 1, seq 0 line 2) is past it.
    expect(refused.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(refused.errors[0].message).toMatch(new RegExp(`^line ${count + 4}: inbox: the inputs waiting at once hold more than 67108864 bytes`));

    // The process served both and goes on.
    const r = await postGraphQL(service.url, `query($id: ID!) { session(id: $id) { eventCount pendingInputs { inputId } } }`, { id: body.session!.id });
    expect(r.body.data.session.eventCount).toBe(1 + count);
    expect(r.body.data.session.pendingInputs).toHaveLength(count);
  }, 180_000);
});
