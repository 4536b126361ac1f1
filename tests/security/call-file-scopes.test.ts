// A call's `files` (docs/contract.md#repair): a call of a file tool changed no
// file in a branch that does not hold its result, so repair words it as safe
// to call again whatever its effect. An external runner's tools are declared
// with their effects and no file scope, and each call of one is recorded with
// the declared effect (a call naming another is refused); a call of one
// carrying `files: only` made a fork's synthetic result call a tool with side
// effects safe to repeat, through appendEvents and a recording alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { appendEvents, claimedRunnerSession, DECLARE_RUNNER_TOOLS, postRecording } from './hostile-doors.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const deploy = (files?: string) => ({ id: 'c1', name: 'deploy', arguments: '{}', ...(files ? { files } : {}) });
const step = (inputId: string, call: object) => [
  { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
  { type: 'turn/start', data: { turn: 1, inputId } },
  { type: 'step/start', data: { turn: 1, step: 1 } },
  { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [call] } },
];

/** The synthetic result a fork right after the call gives it. */
async function forkedResult(id: string): Promise<string> {
  const fork = await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 6 }) { session { id } } }`, { id });
  const evs = await app.ok(`query($id: ID!) { session(id: $id) { events(last: 5) { edges { node { type data } } } } }`, { id: fork.forkSession.session.id });
  const result = evs.session.events.edges.map((e: any) => e.node).find((e: any) => e.type === 'tool/result');
  return result.data.content;
}

describe("a runner's call of a tool it declared with side effects", () => {
  it('saying files "only" is refused by appendEvents, the log unchanged; without it, a fork words the cut-off call by its effect', async () => {
    const s = await claimedRunnerSession(app);
    const declared = await app.ok(DECLARE_RUNNER_TOOLS, {
      input: { sessionId: s.id, leaseToken: s.token, tools: [{ name: 'deploy', effect: 'SIDE_EFFECTS' }] },
    });
    const at = { ...s, eventCount: declared.declareRunnerTools.eventCount };
    const refused = await appendEvents(app, at, step(s.inputId, deploy('only')));
    expect(refused.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'call effect', seq: 6 });
    expect(refused.errors?.[0].message).toContain('call of "deploy" says files "only", but the runner declared "deploy" with no file scope');
    expect((await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: s.id })).session.eventCount).toBe(at.eventCount);

    expect((await appendEvents(app, at, step(s.inputId, deploy()))).errors).toBeUndefined();
    const content = await forkedResult(s.id);
    expect(content).toContain('"deploy" has side effects: it may already have changed the world');
    expect(content).not.toContain('safe to call');
  });

  it('saying files "only" is refused in a recording, naming its line; nothing is imported', async () => {
    const lines = [
      { format: 'forkline.recording', version: 4, session: { id: 'ses_relabel', title: 'relabel', runner: 'ext' } },
      { seq: 0, type: 'session/runner-tools', data: { tools: [{ name: 'deploy', effect: 'side-effects' }] } },
      { seq: 1, type: 'inbox/add', data: { inputId: 'i1', text: 'ship it' } },
      ...step('i1', deploy('only')).map((e, i) => ({ seq: 2 + i, ...e })),
    ];
    const r = await postRecording(app, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toMatch(/^line 7: call effect: .*call of "deploy" says files "only"/);
  });
});
