// What one request makes the service hold of a session's texts is bounded
// whatever the session holds (docs/operations.md "Memory and time"): inputs
// and results of 9 MB each, many of them, through the real doors. The
// service's resident memory is sampled while each request runs:
// - an AG-UI run's MESSAGES_SNAPSHOT, whose turns took inputs queued long
//   before its window: they are read within FORKLINE_PAGE_BYTES, newest first
//   (the old code read every one of them at once);
// - a list of turns asking for `input`: the same budget, keeping the newest
//   turns whose inputs fit (the old code read every input);
// - an external runner's claim of a session whose open turn holds 16 results
//   of 9 MB: repair folds the open turn by pages of STREAM_PAGE_BYTES (the old
//   code read the whole turn).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { underWatch } from '../helpers/under-watch.ts';
import { answerOf, importRecording, MB } from '../helpers/huge-session.ts';
import { recordingHeader } from '../../src/core/recording.ts';

/** Characters of each huge text: two fit in FORKLINE_PAGE_BYTES (16 MiB), not three. */
const HUGE = 9 * MB;
/** Inputs the session's turns take, each queued long before its turn. */
const QUEUED = 10;
/** Inputs waiting at once: six of 9 MB are within a recording's 64 MiB of waiting text (docs/contract.md#formats). */
const AHEAD = 6;
/** Small answers per turn: the turns' answers after the inputs pass the snapshot's 2,000 events. */
const STEPS = 200;
/** Results of 9 MB in the external runner's open turn. */
const RESULTS = 16;
/** The service's old-space limit (MB): RSS then measures what a request holds, not garbage V8 had no reason to collect yet. */
const HEAP_CAP_MB = 192;
/** RSS growth allowed to one request (MB): two huge texts and their copies on the way out, not ten. */
const GROWTH_BOUND_MB = 120;
/** An AG-UI snapshot's: it carries two 9 MB inputs whole, which the others' answers do not; under the heap cap. */
const SNAPSHOT_GROWTH_BOUND_MB = 170;

let service: ServiceProcess;
let base: string;
let queuedId: string;

async function gql(query: string, variables?: Record<string, unknown>) {
  const r = await postGraphQL(service.url, query, variables);
  expect(r.body.errors, JSON.stringify(r.body.errors)?.slice(0, 500)).toBeUndefined();
  return r.body.data;
}

/**
 * A recording of a session run by the pool `ext`: QUEUED turns of STEPS small answers each, each taking a huge input
 * queued AHEAD turns before it (thousands of events before its turn: the last turns' inputs lie far before a
 * snapshot's window).
 */
async function writeQueuedRecording(): Promise<string> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-texts-')), 'queued.jsonl');
  const out = fs.createWriteStream(file);
  const write = (line: unknown) => new Promise<void>((resolve, reject) => out.write(`${JSON.stringify(line)}\n`, (err) => (err ? reject(err) : resolve())));
  await write(recordingHeader({ id: 'ses_queued', title: 'queued', runner: 'ext' }));
  let seq = 0;
  const add = (type: string, data: unknown) => write({ seq: seq++, type, data });
  const queue = (t: number) => (t <= QUEUED ? add('inbox/add', { inputId: `in_${t}`, text: answerOf(3000 + t, HUGE) }) : undefined);
  for (let t = 1; t <= AHEAD; t++) await queue(t);
  for (let turn = 1; turn <= QUEUED; turn++) {
    await add('inbox/remove', { inputId: `in_${turn}`, reason: 'taken' });
    await add('turn/start', { turn, inputId: `in_${turn}` });
    for (let step = 1; step <= STEPS; step++) {
      await add('step/start', { turn, step });
      await add('model/message', { turn, step, text: `turn ${turn} step ${step}`, toolCalls: [] });
      await add('step/end', { turn, step, reason: 'completed' });
    }
    await add('turn/end', { turn, reason: 'completed' });
    await queue(turn + AHEAD);
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return file;
}

beforeAll(async () => {
  service = await startService({
    env: { DATABASE_URL: await createTestDatabase(), FORKLINE_API_TOKENS: undefined, NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}` },
  });
  base = service.url.replace(/\/graphql$/, '');
  queuedId = await importRecording(base, await writeQueuedRecording());
}, 300_000);

afterAll(async () => {
  await service?.stop();
});

/** The MESSAGES_SNAPSHOT of an AG-UI run on `threadId`; the request is closed once it has come. */
async function snapshotOf(threadId: string, runId: string): Promise<Array<{ id: string; role: string; content?: string }>> {
  const abort = new AbortController();
  const post = () =>
    fetch(`${base}/agui`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ threadId, runId, state: {}, messages: [{ id: 'u-1', role: 'user', content: 'one more' }], tools: [], context: [] }),
      signal: abort.signal,
    });
  // A kept-alive connection the server closed as it was reused fails before any answer: the run's id makes a second try the same run.
  const res = await post().catch(post);
  expect(res.status).toBe(200);
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const event = JSON.parse(buffered.slice(0, end).replace(/^data: /, ''));
        buffered = buffered.slice(end + 2);
        if (event.type === 'RUN_ERROR') throw new Error(JSON.stringify(event));
        if (event.type === 'MESSAGES_SNAPSHOT') return event.messages;
      }
    }
  } finally {
    abort.abort();
  }
  throw new Error('the run ended without a MESSAGES_SNAPSHOT');
}

describe('texts of megabytes, many of them, in one request', () => {
  it("an AG-UI run's snapshot reads the inputs its turns took before its window within the page's bytes: the newest turns whose inputs fit", async () => {
    const run = await underWatch(service.child.pid!, base, () => snapshotOf(queuedId, 'run-texts'));
    console.log(`AG-UI snapshot: RSS growth ${run.growthMB.toFixed(0)} MB, slowest /healthz ${run.slowestHealthzMs.toFixed(0)} ms`);
    const users = run.result.filter((m) => m.role === 'user');
    // Two inputs of 9 MB fit 16 MiB (with the window's small answers), a third passes it: the turns of the last two, then the run's own message.
    expect(users.map((m) => m.id)).toEqual([`in_${QUEUED - 1}`, `in_${QUEUED}`, expect.any(String)]);
    expect(users[0].content).toBe(answerOf(3000 + QUEUED - 1, HUGE));
    expect(users[1].content).toBe(answerOf(3000 + QUEUED, HUGE));
    expect(users[2].content).toBe('one more');
    const answers = run.result.filter((m) => m.role === 'assistant');
    expect(answers).toHaveLength(2 * STEPS);
    expect(answers[0].content).toBe(`turn ${QUEUED - 1} step 1`);
    // The old code read all ten inputs at once (about 90 MB of text, and its copies) and ran out of its 192 MB heap.
    // The snapshot sends two of them whole, and their copies on the way out (strings, JSON, the socket's buffers)
    // are garbage V8 may keep until its heap fills: 23-34 MB was usual, 148 MB was seen on a loaded machine.
    expect(run.growthMB).toBeLessThan(SNAPSHOT_GROWTH_BOUND_MB);
  }, 120_000);

  it('a list of turns asking for its inputs reads them within the same bytes: its newest turns whose inputs fit', async () => {
    for (const args of ['', '(last: 1000)']) {
      const run = await underWatch(service.child.pid!, base, () =>
        gql(`query($id: ID!) { session(id: $id) { turns${args} { turn input } } }`, { id: queuedId }),
      );
      console.log(`turns${args} { input }: RSS growth ${run.growthMB.toFixed(0)} MB, slowest /healthz ${run.slowestHealthzMs.toFixed(0)} ms`);
      const turns = run.result.session.turns as Array<{ turn: number; input: string }>;
      expect(turns.map((t) => t.turn)).toEqual([QUEUED - 1, QUEUED]);
      expect(turns.map((t) => t.input)).toEqual([answerOf(3000 + QUEUED - 1, HUGE), answerOf(3000 + QUEUED, HUGE)]);
      expect(run.growthMB).toBeLessThan(GROWTH_BOUND_MB);
    }
    // A list that does not ask for them lists every turn.
    const all = await gql('query($id: ID!) { session(id: $id) { turns { turn inputId } } }', { id: queuedId });
    expect(all.session.turns).toHaveLength(QUEUED); // the AG-UI run's message waits for the pool's runner: no turn of its own yet
  }, 120_000);

  it("an external runner's claim repairs an open turn of 16 results of 9 MB by pages, never holding the turn", async () => {
    const { createSession } = await gql('mutation { createSession(input: {title: "open", runner: "ext2"}) { id } }');
    const id = createSession.id as string;
    const { sendMessage } = await gql('mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "go"}) { inputId } }', { id });
    const claim = async (runner: string) =>
      (
        await gql('mutation($id: ID!, $r: String!) { claimSession(input: {sessionId: $id, runnerId: $r}) { lease { token } session { eventCount } } }', {
          id,
          r: runner,
        })
      ).claimSession;
    const { lease, session } = await claim('dies');
    let count = session.eventCount as number;
    const append = async (events: Array<{ type: string; data: unknown }>) => {
      const d = await gql('mutation($input: AppendEventsInput!) { appendEvents(input: $input) { session { eventCount } } }', {
        input: { sessionId: id, leaseToken: lease.token, expectedEventCount: count, events },
      });
      count = d.appendEvents.session.eventCount;
    };
    const calls = Array.from({ length: RESULTS + 1 }, (_, i) => ({ id: `c${i}`, name: 'clock', arguments: '{}', effect: 'read-only' }));
    await append([
      { type: 'inbox/remove', data: { inputId: sendMessage.inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: sendMessage.inputId } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: calls } },
    ]);
    for (let i = 0; i < RESULTS; i++) {
      const content = answerOf(2000 + i, HUGE);
      await append([{ type: 'tool/result', data: { turn: 1, step: 1, callId: `c${i}`, resultId: `r${i}`, status: 'ok', content, name: 'clock' } }]);
    }
    // The runner goes away mid-turn (its last call never answered); the next claim repairs the turn.
    await gql('mutation($id: ID!, $t: Int!) { releaseSession(input: {sessionId: $id, leaseToken: $t}) { id } }', { id, t: lease.token });
    const run = await underWatch(service.child.pid!, base, () => claim('heir'));
    console.log(`claim with repair of ${RESULTS} x 9 MB: RSS growth ${run.growthMB.toFixed(0)} MB, slowest /healthz ${run.slowestHealthzMs.toFixed(0)} ms`);
    expect(run.result.session.eventCount).toBe(count + 3);
    const tail = await gql('query($id: ID!) { session(id: $id) { status events(last: 3) { edges { node { type synthetic data } } } } }', { id });
    expect(tail.session.events.edges.map((e: any) => [e.node.type, e.node.synthetic])).toEqual([
      ['tool/result', true],
      ['step/end', true],
      ['turn/end', true],
    ]);
    expect(tail.session.events.edges[0].node.data).toMatchObject({ callId: `c${RESULTS}`, status: 'interrupted' });
    // The old code read the whole open turn: 144 MB of results, and their copies.
    expect(run.growthMB).toBeLessThan(GROWTH_BOUND_MB / 2);
  }, 180_000);
});
