// What one request makes the service hold of answers, waiting inputs and error
// reports is bounded whatever it asks (docs/operations.md "Memory and time"):
// each of those texts is read within one budget per request (FORKLINE_PAGE_BYTES
// characters), and a text past it comes cut, flagged `textTruncated` /
// `errorTruncated`. A recording imported through POST /recordings holds a 9 MB
// answer, a failed turn with a 9 MB error report and five 9 MB inputs waiting;
// one query asks for the answer under twelve aliases, the inputs and the turns'
// errors: about 150 MB of text. The old code read every one of them whole
// (and its heap-capped process held them all at once); the service's resident
// memory is sampled while the request runs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { underWatch } from '../helpers/under-watch.ts';
import { answerOf, importRecording, MB } from '../helpers/huge-session.ts';
import { recordingHeader } from '../../src/core/recording.ts';

/** Characters of each huge text: one fits FORKLINE_PAGE_BYTES (16 MiB), two do not. */
const HUGE = 9 * MB;
const PAGE_BYTES = 16 * 1024 * 1024;
/** Inputs waiting in the inbox. */
const WAITING = 5;
/** Aliases of lastAnswer in the one query. */
const ALIASES = 12;
/** The service's old-space limit (MB): RSS then measures what a request holds, not garbage V8 had no reason to collect yet. */
const HEAP_CAP_MB = 192;
/** RSS growth allowed to the request (MB): a budget of text and its copies on the way out, not 150 MB of it. */
const GROWTH_BOUND_MB = 130;

let service: ServiceProcess;
let base: string;
let sessionId: string;

async function writeRecording(): Promise<string> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-request-texts-')), 'texts.jsonl');
  const out = fs.createWriteStream(file);
  const write = (line: unknown) => new Promise<void>((resolve, reject) => out.write(`${JSON.stringify(line)}\n`, (err) => (err ? reject(err) : resolve())));
  await write(recordingHeader({ id: 'ses_texts', title: 'texts', runner: 'ext' }));
  let seq = 0;
  const add = (type: string, data: unknown) => write({ seq: seq++, type, data });
  // Turn 1 answers 9 MB; turn 2 fails with a report of 9 MB.
  await add('inbox/add', { inputId: 'in_1', text: 'one' });
  await add('inbox/remove', { inputId: 'in_1', reason: 'taken' });
  await add('turn/start', { turn: 1, inputId: 'in_1' });
  await add('step/start', { turn: 1, step: 1 });
  await add('model/message', { turn: 1, step: 1, text: answerOf(1, HUGE), toolCalls: [] });
  await add('step/end', { turn: 1, step: 1, reason: 'completed' });
  await add('turn/end', { turn: 1, reason: 'completed' });
  await add('inbox/add', { inputId: 'in_2', text: 'two' });
  await add('inbox/remove', { inputId: 'in_2', reason: 'taken' });
  await add('turn/start', { turn: 2, inputId: 'in_2' });
  await add('step/start', { turn: 2, step: 1 });
  await add('plugin/agent/error', { turn: 2, step: 1, message: answerOf(2, HUGE) });
  await add('step/end', { turn: 2, step: 1, reason: 'failed' });
  await add('turn/end', { turn: 2, reason: 'failed' });
  for (let i = 0; i < WAITING; i++) await add('inbox/add', { inputId: `wait_${i}`, text: answerOf(3000 + i, HUGE) });
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return file;
}

async function gql(query: string, variables?: Record<string, unknown>) {
  const r = await postGraphQL(service.url, query, variables);
  expect(r.body.errors, JSON.stringify(r.body.errors)?.slice(0, 500)).toBeUndefined();
  return r.body.data;
}

beforeAll(async () => {
  service = await startService({
    env: { DATABASE_URL: await createTestDatabase(), FORKLINE_API_TOKENS: undefined, NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}` },
  });
  base = service.url.replace(/\/graphql$/, '');
  sessionId = await importRecording(base, await writeRecording());
}, 300_000);

afterAll(async () => {
  await service?.stop();
});

describe("one request's answers, waiting inputs and error reports", () => {
  it('come whole while they fit the budget, with their lengths', async () => {
    const d = await gql('query($id: ID!) { session(id: $id) { lastAnswer { seq text textTruncated textLength } } }', { id: sessionId });
    expect(d.session.lastAnswer).toEqual({ seq: 4, text: answerOf(1, HUGE), textTruncated: false, textLength: HUGE });
    const e = await gql('query($id: ID!) { session(id: $id) { turns { turn error errorTruncated errorCode } } }', { id: sessionId });
    expect(e.session.turns).toEqual([
      { turn: 1, error: null, errorTruncated: false, errorCode: null },
      { turn: 2, error: answerOf(2, HUGE), errorTruncated: false, errorCode: null },
    ]);
  }, 120_000);

  it('are read within FORKLINE_PAGE_BYTES characters in all, whatever the query asks: past it they come cut and say so', async () => {
    const answer = 'seq text textTruncated textLength';
    const aliases = Array.from({ length: ALIASES }, (_, i) => `a${i}: lastAnswer { ${answer} }`).join(' ');
    const query = `query($id: ID!) { session(id: $id) { ${aliases} pendingInputs { inputId text textTruncated } turns { turn error errorTruncated } } }`;
    const run = await underWatch(service.child.pid!, base, () => gql(query, { id: sessionId }));
    console.log(`${ALIASES} answers, ${WAITING} inputs, 1 error of 9 MB: RSS growth ${run.growthMB.toFixed(0)} MB`);
    const s = run.result.session;
    const answers = Array.from({ length: ALIASES }, (_, i) => s[`a${i}`] as { seq: number; text: string; textTruncated: boolean; textLength: number });
    const inputs = s.pendingInputs as Array<{ inputId: string; text: string; textTruncated: boolean }>;
    const texts = [
      ...answers,
      ...inputs,
      ...s.turns.map((t: { error: string | null; errorTruncated: boolean }) => ({ text: t.error ?? '', textTruncated: t.errorTruncated })),
    ];
    // Every field answers; together they hold the budget, no more.
    expect(inputs.map((p) => p.inputId)).toEqual(Array.from({ length: WAITING }, (_, i) => `wait_${i}`));
    const read = texts.reduce((n, t) => n + t.text.length, 0);
    expect(read).toBe(PAGE_BYTES);
    // A text is whole or a prefix of its event's, and says which.
    for (const a of answers) {
      expect(a.seq).toBe(4);
      expect(a.textLength).toBe(HUGE);
      expect(a.textTruncated).toBe(a.text.length < HUGE);
      expect(answerOf(1, HUGE).startsWith(a.text)).toBe(true);
    }
    inputs.forEach((p, i) => {
      expect(p.textTruncated).toBe(p.text.length < HUGE);
      expect(answerOf(3000 + i, HUGE).startsWith(p.text)).toBe(true);
    });
    expect(texts.filter((t) => t.textTruncated).length).toBeGreaterThanOrEqual(ALIASES + WAITING - 1);
    // The old code read every text whole: 18 of 9 MB.
    expect(run.growthMB).toBeLessThan(GROWTH_BOUND_MB);
  }, 180_000);
});
