// Notes (the session workspace of note_write and note_read; docs/agents.md) as
// they arrive from outside. forkline's own note_write holds a note to a key of
// 200 characters and a value of 100,000, and Session.workspace and note_read
// read them back; a recording or a runner's batch wrote plugin/workspace/write
// events of any shape and size (a plugin event's data was not looked at), so a
// session could hold notes of megabytes under a thousand keys, each read
// whole by one Session.workspace.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { appendEvents, claimedRunnerSession, postRecording, sessionCount } from './hostile-doors.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

/** A turn whose call `c<i>` wrote the note `key` = `value`, its ok result right after. */
const noteTurn = (turn: number, inputId: string, key: unknown, value: unknown) => [
  { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
  { type: 'turn/start', data: { turn, inputId } },
  { type: 'step/start', data: { turn, step: 1 } },
  { type: 'model/message', data: { turn, step: 1, text: '', toolCalls: [{ id: `c${turn}`, name: 'note_write', arguments: '{}' }] } },
  { type: 'plugin/workspace/write', data: { callId: `c${turn}`, key, value } },
  { type: 'tool/result', data: { turn, step: 1, callId: `c${turn}`, resultId: `r${turn}`, status: 'ok', content: 'wrote', name: 'note_write' } },
  { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
  { type: 'turn/end', data: { turn, reason: 'completed' } },
];

const recording = (key: unknown, value: unknown) => {
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_notes', title: 'notes' } }];
  [{ type: 'inbox/add', data: { inputId: 'i1', text: 'note it' } }, ...noteTurn(1, 'i1', key, value)].forEach((e, seq) => lines.push({ seq, ...e }));
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
};

const HUGE = 'v'.repeat(2_000_000);

describe('a note from outside', () => {
  it.each([
    ['a value of 2 MB', 'k', HUGE, /value.*100000/],
    ['a key of 1,000 characters', 'k'.repeat(1000), 'v', /key.*200/],
    ['a key that is no string', { not: 'a key' }, 'v', /key/],
  ])('%s is refused by POST /recordings naming its line; nothing is imported', async (_what, key, value, why) => {
    const before = await sessionCount(app);
    const r = await postRecording(app, recording(key, value));
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toMatch(/^line 7: /);
    expect(r.body.errors[0].message).toMatch(why);
    expect(await sessionCount(app)).toBe(before);
  });

  it("a value of 2 MB is refused in a runner's appendEvents, the log unchanged; one within note_write's bounds is read back", async () => {
    const claimed = await claimedRunnerSession(app);
    // The call goes first, alone (docs/runners.md "Why the call goes first"); the note comes with its result.
    expect((await appendEvents(app, claimed, noteTurn(1, claimed.inputId, 'k', HUGE).slice(0, 4))).errors).toBeUndefined();
    const s = { ...claimed, eventCount: claimed.eventCount + 4 };
    const refused = await appendEvents(app, s, noteTurn(1, s.inputId, 'k', HUGE).slice(4));
    expect(refused.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT' });
    expect(refused.errors?.[0].message).toMatch(/plugin\/workspace\/write.*value/);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: s.id })).session.eventCount).toBe(s.eventCount);
    expect((await appendEvents(app, s, noteTurn(1, s.inputId, 'k', 'v'.repeat(100_000)).slice(4))).errors).toBeUndefined();
    const read = await app.ok(`query($id: ID!) { session(id: $id) { workspace { key value } } }`, { id: s.id });
    expect(read.session.workspace).toEqual([{ key: 'k', value: 'v'.repeat(100_000) }]);
  });
});
