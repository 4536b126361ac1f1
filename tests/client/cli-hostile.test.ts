// What `forkline` writes to a terminal of content from outside (docs/api.md,
// docs/operations.md "Threat model"): a recording imported through POST
// /recordings carries ANSI and OSC sequences (clear the screen, write the
// clipboard, a hyperlink), cursor moves, BEL, CR and BS overwrites, an 8-bit
// CSI and a bidi override in its title, instructions, input, answer, tool
// result and error. Run on a pseudo-terminal, the CLI sends none of them raw:
// each is shown as its escape. Into a pipe, lines for people are the same;
// JSON lines carry the exact values.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { runCli, runCliInTerminal } from '../helpers/cli.ts';
import { postRecording } from '../security/hostile-doors.ts';

/** Clear the screen and home the cursor, write the clipboard (OSC 52), a hyperlink to elsewhere (OSC 8), overwrite the line, an 8-bit CSI, a bidi override. */
const hostile = (where: string) =>
  `${where}\x1b[2J\x1b[H\x1b]52;c;cHduZWQ=\x07\x1b]8;;http://attacker.invalid/\x1b\\click\x1b]8;;\x1b\\ \x1b[8mhidden\x1b[28m\x1b[1A\rOK\x08\x9b31m\u202Efdp.exe`;
/** How the start of `hostile(where)` reads on the terminal. */
const shown = (where: string) => `${where}\\x1b[2J\\x1b[H\\x1b]52;c;cHduZWQ=\\x07\\x1b]8;;http://attacker.invalid/\\x1b\\click`;

function hostileRecording(): string {
  const turn = 1;
  const events = [
    { type: 'session/title', data: { title: hostile('title') } },
    { type: 'session/instructions', data: { text: hostile('instructions') } },
    { type: 'inbox/add', data: { inputId: 'in_1', text: hostile('input') } },
    { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
    { type: 'turn/start', data: { turn, inputId: 'in_1' } },
    { type: 'step/start', data: { turn, step: 1 } },
    { type: 'model/message', data: { turn, step: 1, text: `answer ${hostile('answer')}`, toolCalls: [{ id: 'c1', name: 'clock', arguments: '{}' }] } },
    { type: 'tool/result', data: { turn, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: hostile('result') } },
    { type: 'plugin/agent/error', data: { turn, step: 1, message: hostile('error') } },
    { type: 'step/end', data: { turn, step: 1, reason: 'failed' } },
    { type: 'turn/end', data: { turn, reason: 'failed' } },
  ];
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_hostile', title: hostile('title') } }];
  events.forEach((e, seq) => lines.push({ seq, ...e }));
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}

let app: TestApp;
let id: string;
beforeAll(async () => {
  app = await startTestApp();
  const r = await postRecording(app, hostileRecording());
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  id = r.body.session.id;
});
afterAll(() => app?.close());

/** What in `text` a terminal would act on or hide: controls (a newline only as CRLF, the terminal's own), DEL, C1, bidi controls. */
function rawControls(text: string): string[] {
  const found: string[] = [];
  // eslint-disable-next-line no-control-regex -- the control characters are what it looks for
  for (const m of text.matchAll(/\r\n|[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200b]/gu)) if (m[0] !== '\r\n') found.push(m[0]);
  return found;
}

describe('forkline on a terminal, with hostile content', () => {
  it('sessions, show and an error: every control sequence shown as its escape, none sent raw', async () => {
    const list = await runCliInTerminal(app.url, ['sessions']);
    expect(list.code).toBe(0);
    const show = await runCliInTerminal(app.url, ['show', id]);
    expect(show.code).toBe(0);
    const missing = await runCliInTerminal(app.url, ['show', `ses_${hostile('id')}`]);
    expect(missing.code).toBe(1);
    for (const { bytes } of [list, show, missing]) expect(rawControls(bytes.toString('utf8'))).toEqual([]);

    const listed = list.bytes.toString('utf8');
    expect(listed).toContain(`${id}  IDLE`);
    expect(listed).toContain(shown('title'));
    const lines = show.bytes.toString('utf8').split('\r\n');
    expect(lines[0]).toContain(shown('title'));
    for (const [label, where] of [
      ['  instructions: ', 'instructions'],
      ['  last turn 1: failed', 'input'],
      ['    error: ', 'error'],
      ['  last answer (seq 6): ', 'answer'],
    ])
      expect(lines.find((l) => l.startsWith(label)) ?? lines, label).toContain(shown(where));
    // The rest of the payload too: the overwrite, the 8-bit CSI and the override.
    expect(lines[0]).toContain('\\x1b[1A\\x0dOK\\x08\\x9b31m\\u202efdp.exe');
    expect(missing.bytes.toString('utf8')).toContain(`forkline: SESSION_NOT_FOUND: session ses_${shown('id')}`);
  });

  it('search: matched words in bold (the only escape sequences), the hostile ones shown', async () => {
    const r = await runCliInTerminal(app.url, ['search', 'answer']);
    expect(r.code).toBe(0);
    const text = r.bytes.toString('utf8');
    // On a terminal the CLI bolds the matched words itself: the output went to a TTY.
    expect(text).toContain('\x1b[1manswer\x1b[22m');
    expect(rawControls(text.replaceAll('\x1b[1m', '').replaceAll('\x1b[22m', ''))).toEqual([]);
    expect(text).toContain(shown('title'));
  });

  it("send --wait: the streamed answer's lines kept, its control sequences shown", async () => {
    const session = (await app.ok(`mutation { createSession(input: { title: "plain" }) { id } }`)).createSession.id;
    const r = await runCliInTerminal(app.url, ['send', session, `first line\n${hostile('echo')}`, '--wait']);
    expect(r.code).toBe(0);
    const text = r.bytes.toString('utf8');
    expect(rawControls(text)).toEqual([]);
    expect(text).toContain(`Echo: first line\r\n${shown('echo')}`);
    expect(text).toContain('[turn 1 completed]');
  });
});

describe('forkline into a pipe, with hostile content', () => {
  it('lines for people are shown as on a terminal; JSON lines keep the exact values, written without a raw control', async () => {
    const show = await runCli(app.url, ['show', id]);
    expect(show.code).toBe(0);
    expect(rawControls(show.stdout.replaceAll('\n', '\r\n'))).toEqual([]);
    expect(show.stdout).toContain(shown('title'));

    const events = await runCli(app.url, ['events', id]);
    expect(events.code).toBe(0);
    expect(rawControls(events.stdout.replaceAll('\n', '\r\n'))).toEqual([]);
    const parsed = events.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(parsed[0].data).toEqual({ title: hostile('title') });
    expect(parsed[6].data.text).toBe(`answer ${hostile('answer')}`);

    const json = await runCli(app.url, ['show', id, '--json']);
    expect(rawControls(json.stdout.replaceAll('\n', '\r\n'))).toEqual([]);
    expect(JSON.parse(json.stdout).title).toBe(hostile('title'));
  });
});
