// `forkline show` on a session whose texts the server cut (one request reads
// FORKLINE_PAGE_BYTES characters of answers, inputs and error reports in all,
// docs/api.md "Texts in one request"): the CLI runs as a subprocess against a
// real server, on a recording imported through POST /recordings whose answer,
// failed turn's input and error report are each longer than the budget. Each
// cut text says so, how long it is or how much came, and the command that
// prints its event whole; that command, run in turn, prints it whole. The old
// CLI printed the cut beginnings as if they were the texts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { runCli } from '../helpers/cli.ts';
import { answerOf, importRecording } from '../helpers/huge-session.ts';
import { recordingHeader } from '../../src/core/recording.ts';

const PAGE_BYTES = 64 * 1024;
/** Characters of the answer, the input and the error: each past the budget. */
const ANSWER = 150_000;
const INPUT = 100_000;
const ERROR = 90_000;

let app: TestApp;
let sessionId: string;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-cli-cut-'));

async function writeRecording(): Promise<string> {
  const lines: unknown[] = [recordingHeader({ id: 'ses_cut', title: 'cut texts', runner: 'ext' })];
  const add = (type: string, data: unknown) => lines.push({ seq: lines.length - 1, type, data });
  add('inbox/add', { inputId: 'in_1', text: 'one' });
  add('inbox/remove', { inputId: 'in_1', reason: 'taken' });
  add('turn/start', { turn: 1, inputId: 'in_1' });
  add('step/start', { turn: 1, step: 1 });
  add('model/message', { turn: 1, step: 1, text: answerOf(1, ANSWER), toolCalls: [] }); // seq 4
  add('step/end', { turn: 1, step: 1, reason: 'completed' });
  add('turn/end', { turn: 1, reason: 'completed' });
  add('inbox/add', { inputId: 'in_2', text: answerOf(2, INPUT) }); // seq 7
  add('inbox/remove', { inputId: 'in_2', reason: 'taken' });
  add('turn/start', { turn: 2, inputId: 'in_2' });
  add('step/start', { turn: 2, step: 1 });
  add('plugin/agent/error', { turn: 2, step: 1, message: answerOf(3, ERROR) }); // seq 11
  add('step/end', { turn: 2, step: 1, reason: 'failed' });
  add('turn/end', { turn: 2, reason: 'failed' });
  const file = path.join(tmp, 'cut.jsonl');
  fs.writeFileSync(file, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
  return file;
}

beforeAll(async () => {
  app = await startTestApp({ pageBytes: PAGE_BYTES });
  sessionId = await importRecording(app.url.replace(/\/graphql$/, ''), await writeRecording());
}, 60_000);
afterAll(async () => {
  await app?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The CLI's run, which must succeed. */
async function cli(args: string[]) {
  const r = await runCli(app.url, args);
  expect(r.code, r.stderr.slice(-2000)).toBe(0);
  return r.stdout;
}

/** Runs the command a cut note names (`forkline events …`) and returns the one event it prints. */
async function followNote(note: string): Promise<{ seq: number; type: string; data: Record<string, unknown> }> {
  const command = /: forkline (events \S+ --after \d+ --first 1)\]$/.exec(note)?.[1];
  expect(command, note).toBeDefined();
  const lines = (await cli(command!.split(' '))).trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]);
}

describe('forkline show on texts the server cut', () => {
  it('says under each cut text that it is cut, how long, and prints the command that shows it whole', async () => {
    const out = (await cli(['show', sessionId])).split('\n');
    const after = (prefix: string) => {
      const i = out.findIndex((l) => l.startsWith(prefix));
      expect(i, out.join('\n')).toBeGreaterThanOrEqual(0);
      return out[i + 1];
    };
    // The answer: its whole length, from the server.
    // Which text the budget went to first is the server's race: each of them is cut (each is longer than it).
    const answerNote = after('  last answer (seq 4): ');
    expect(answerNote).toBe(
      `    … [cut: ${ANSWER.toLocaleString('en-US')} characters in all; the whole answer is in event 4: forkline events ${sessionId} --after 3 --first 1]`,
    );
    // The failed turn's input and error: what came of them (at most the budget), and their events.
    const inputNote = after('  last turn 2: failed');
    expect(inputNote).toMatch(
      new RegExp(
        `^    … \\[cut: the server sent its first [\\d,]+ characters; the whole input is in event 7: forkline events ${sessionId} --after 6 --first 1\\]$`,
      ),
    );
    const errorNote = after('    error: ');
    expect(errorNote).toMatch(
      new RegExp(
        `^    … \\[cut: the server sent its first [\\d,]+ characters; the whole error is in event 11: forkline events ${sessionId} --after 10 --first 1\\]$`,
      ),
    );
    const sent = [inputNote, errorNote].map((n) => Number(/first ([\d,]+) characters/.exec(n)![1].replace(/,/g, '')));
    expect(sent[0] + sent[1]).toBeLessThanOrEqual(PAGE_BYTES);

    // Each command prints its event, the text whole.
    const answer = await followNote(answerNote);
    expect(answer).toMatchObject({ seq: 4, type: 'model/message' });
    expect(answer.data.text).toBe(answerOf(1, ANSWER));
    const input = await followNote(inputNote);
    expect(input).toMatchObject({ seq: 7, type: 'inbox/add' });
    expect(input.data.text).toBe(answerOf(2, INPUT));
    const error = await followNote(errorNote);
    expect(error).toMatchObject({ seq: 11, type: 'plugin/agent/error' });
    expect(error.data.message).toBe(answerOf(3, ERROR));
  }, 60_000);

  it('--json carries the flags, the whole length and the seqs of the cut texts', async () => {
    const s = JSON.parse(await cli(['show', sessionId, '--json']));
    expect(s.lastAnswer).toMatchObject({ seq: 4, textTruncated: true, textLength: ANSWER });
    expect(answerOf(1, ANSWER).startsWith(s.lastAnswer.text)).toBe(true);
    expect(s.lastTurn).toMatchObject({ turn: 2, reason: 'failed', inputTruncated: true, inputSeq: 7, errorTruncated: true, errorSeq: 11 });
    expect(s.lastAnswer.text.length + s.lastTurn.input.length + s.lastTurn.error.length).toBe(PAGE_BYTES);
  }, 60_000);

  it('events --first N prints N events from --after on', async () => {
    const lines = (await cli(['events', sessionId, '--after', '5', '--first', '3'])).trimEnd().split('\n');
    expect(lines.map((l) => JSON.parse(l).seq)).toEqual([6, 7, 8]);
    const bad = await runCli(app.url, ['events', sessionId, '--first', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--first must be at least 1, got 0');
  }, 60_000);
});
