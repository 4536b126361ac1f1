// `npx forkline …` against a real server: every command, exit codes and error codes.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-cli-'));
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const TSX = `${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`;

/** Runs the CLI (through tsx directly; one test goes through `npx forkline`). */
function cli(args: string[], opts: { npx?: boolean; env?: Record<string, string>; onOutput?: (stdout: string, stop: () => void) => void } = {}): Promise<Run> {
  const [cmd, argv] = opts.npx ? ['npx', ['forkline', ...args]] : [process.execPath, [TSX, `${PROJECT_ROOT}client/cli.ts`, ...args]];
  const child = spawn(cmd, argv as string[], { cwd: PROJECT_ROOT, env: { ...process.env, FORKLINE_URL: app.url, ...opts.env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => {
    stdout += c;
    opts.onOutput?.(stdout, () => child.kill('SIGINT'));
  });
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const lines = (s: string) => s.trim().split('\n').filter(Boolean);

describe('forkline CLI', () => {
  let id: string;
  let childId: string;

  it('sends a message and streams the answer until its turn ends (--wait)', async () => {
    id = (await app.ok(`mutation { createSession(input: { title: "cli" }) { id } }`)).createSession.id;
    const r = await cli(['send', id, '!slow 10\nanswer me in a few words', '--wait']);
    expect(r.stderr).toContain('[turn 1 completed]');
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('Echo: answer me in a few words');
  });

  it('lists sessions (through npx forkline), prints events, follows live ones', async () => {
    const [sessions, events] = await Promise.all([cli(['sessions'], { npx: true }), cli(['events', id, '--after', '4'])]);
    expect(sessions.code).toBe(0);
    expect(sessions.stdout).toMatch(new RegExp(`${id}\\s+IDLE\\s+8 events\\s+1 turns\\s+cli`));
    expect(lines(events.stdout).map((l) => JSON.parse(l).seq)).toEqual([5, 6, 7]);
    expect(JSON.parse(lines(events.stdout)[2])).toEqual({ seq: 7, type: 'turn/end', data: { turn: 1, reason: 'completed' } });

    let appended = false;
    const f = await cli(['events', id, '--after', '6', '--follow'], {
      onOutput: (out, stop) => {
        if (out.includes('"seq":8')) stop();
        else if (out.includes('"seq":7') && !appended) {
          appended = true; // caught up, so listening: what is appended now arrives live
          void app.services.store.append(id, [{ type: 'session/title', data: { title: 'renamed' } }]);
        }
      },
    });
    expect(lines(f.stdout).map((l) => JSON.parse(l).seq)).toEqual([7, 8]);
  });

  it('says when a fork cuts between an input being taken and its turn starting (nothing in the child answers it)', async () => {
    const sid = (await app.ok(`mutation { createSession(input: { title: "taken" }) { id } }`)).createSession.id;
    await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: sid, text: 'take me' } });
    await app.services.host.idle();
    const log = await app.services.store.log.page(sid, -1, 100);
    const taken = log.find((e) => e.type === 'inbox/remove')!;
    const added = log.find((e) => e.type === 'inbox/add')!;
    const [at, before] = await Promise.all([cli(['fork', sid, '--at', String(taken.seq)]), cli(['fork', sid, '--at', String(taken.seq - 1)])]);
    expect(at.code).toBe(0);
    const inputId = (added.data as { inputId: string }).inputId;
    expect(at.stdout).toContain(
      `note: input ${inputId} (#${added.seq}) was taken but its turn had not started at the cut: nothing in the child will answer it; send it again to answer it`,
    );
    expect(before.code).toBe(0);
    expect(before.stdout).not.toContain('note:');
  });

  it('forks, branches, exports and imports', async () => {
    const [fork, branch] = await Promise.all([cli(['fork', id, '--at', '4', '--title', 'child', '--json']), cli(['branch', id])]);
    expect(fork.code).toBe(0);
    const f = JSON.parse(fork.stdout);
    childId = f.session.id;
    expect(f).toMatchObject({ cutSeq: 4, session: { title: 'child', parent: { id } } });
    expect(f.syntheticEvents.map((e: any) => e.type)).toEqual(['step/end', 'turn/end']);

    expect(branch.code).toBe(0);
    expect(branch.stdout).toContain('cut at seq 7; 0 synthetic closer(s)');

    const exported = await cli(['export', childId]);
    expect(exported.code).toBe(0);
    const recording = lines(exported.stdout);
    expect(JSON.parse(recording[0])).toMatchObject({ format: 'forkline.recording', version: 4, session: { id: childId } });
    const file = path.join(tmp, 'child.jsonl');
    fs.writeFileSync(file, exported.stdout);
    const imported = await cli(['import', file, '--json']);
    expect(imported.code).toBe(0);
    const s = JSON.parse(imported.stdout);
    expect(s.id).not.toBe(childId);
    expect(s.eventCount).toBe(recording.length - 1);
  });

  it('shows one session: its row, lineage, fork points, last turn and answer; a missing one is SESSION_NOT_FOUND', async () => {
    const parent = (await app.ok(`mutation { createSession(input: { title: "shown", instructions: "be brief" }) { id } }`)).createSession.id;
    expect((await cli(['send', parent, 'first words', '--wait'])).code).toBe(0);
    const fork = (
      await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 5, title: "shown child" }) { session { id } } }`, { id: parent })
    ).forkSession.session.id;
    const [shown, child, json, missing] = await Promise.all([
      cli(['show', parent]),
      cli(['show', fork]),
      cli(['show', parent, '--json']),
      cli(['show', 'ses_missing']),
    ]);
    expect(shown.code).toBe(0);
    const out = lines(shown.stdout);
    expect(out[0]).toMatch(new RegExp(`^${parent}\\s+IDLE\\s+\\d+ events\\s+1 turns\\s+shown$`));
    expect(out).toEqual(
      expect.arrayContaining([
        '  instructions: be brief',
        '  1 child forked at seq 5',
        expect.stringMatching(/^ {2}last turn 1: completed, \d+ ms, input: first words$/),
      ]),
    );
    expect(out.at(-1)).toMatch(/^ {2}last answer \(seq \d+\): Echo: first words$/);
    // The marker and the closers come before its own events.
    expect(lines(child.stdout)).toEqual(
      expect.arrayContaining([`  inherits 6 events of "shown" (0..5); its own from seq 9`, '  last turn 1: forked, 0 ms, input: first words']),
    );
    expect(JSON.parse(json.stdout)).toMatchObject({ id: parent, forkPoints: [{ seq: 5, childCount: 1 }], lastTurn: { turn: 1, reason: 'completed' } });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^forkline: SESSION_NOT_FOUND: session ses_missing not found/);
  });

  it('deletes a session; one with children only with --with-descendants', async () => {
    const { forkSession } = await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 2 }) { session { id } } }`, { id: childId });
    const refused = await cli(['delete', childId]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^forkline: SESSION_HAS_CHILDREN: /);
    const deleted = await cli(['delete', childId, '--with-descendants', '--json']);
    expect(deleted.code).toBe(0);
    expect(new Set(JSON.parse(deleted.stdout).deletedSessionIds)).toEqual(new Set([childId, forkSession.session.id]));
    const gone = await cli(['events', childId]);
    expect(gone.stderr).toMatch(/SESSION_NOT_FOUND/);
  });

  it('new creates a session (title, model, instructions) and, with --message --wait, prints its first answer', async () => {
    const [made, answered, queued, waitAlone, extra] = await Promise.all([
      cli(['new', '--json', '--title', 'from the cli', '--model', 'scripted:m2', '--instructions', 'be brief']),
      cli(['new', '--title', 'asked at once', '--message', 'hello from a shell', '--wait']),
      cli(['new', '--json', '--message', 'later']),
      cli(['new', '--wait']),
      cli(['new', 'stray']),
    ]);
    expect(made.code).toBe(0);
    const session = JSON.parse(made.stdout);
    expect(session).toMatchObject({ title: 'from the cli', model: { provider: 'scripted', model: 'm2' }, status: 'IDLE' });
    const { session: stored } = await app.ok('query($id: ID!) { session(id: $id) { instructions } }', { id: session.id });
    expect(stored.instructions).toBe('be brief');

    expect(answered.code).toBe(0);
    const [row, answer] = lines(answered.stdout);
    expect(row).toMatch(/^ses_\S+\s+IDLE\s+1 events\s+0 turns\s+asked at once$/);
    expect(answer).toBe('Echo: hello from a shell');
    expect(answered.stderr).toContain('[turn 1 completed]');

    expect(queued.code).toBe(0);
    const [queuedSession, sent] = lines(queued.stdout).map((l) => JSON.parse(l));
    expect(sent.inputId).toMatch(/\S/);
    await waitFor(async () => (await app.ok('query($id: ID!) { session(id: $id) { turnCount } }', { id: queuedSession.id })).session.turnCount === 1);

    for (const [r, said] of [
      [waitAlone, '--wait waits for the answer to --message'],
      [extra, 'expected no arguments'],
    ] as const) {
      expect(r).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr).toContain(said);
    }
  });

  it('fails clearly: GraphQL error codes, usage errors, unreachable server', async () => {
    const [missing, range, usage, badInt, down, downFollow, noFile, dashValue, firstZero, firstHuge] = await Promise.all([
      cli(['events', 'ses_missing', '--follow']),
      cli(['fork', id, '--at', '999']),
      cli(['send', id]),
      cli(['fork', id, '--at', 'x']),
      cli(['sessions', '--url', 'http://127.0.0.1:9/graphql']),
      cli(['events', 'ses_x', '--follow', '--url', 'http://127.0.0.1:9/graphql']),
      cli(['import', path.join(tmp, 'nope.jsonl')]),
      cli(['fork', id, '--at', '-5']),
      cli(['sessions', '--first', '0']),
      cli(['search', 'anything', '--first', '5000']),
    ]);
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toMatch(/^forkline: SESSION_NOT_FOUND: session ses_missing not found/);
    expect(range.code).toBe(1);
    expect(range.stderr).toMatch(/^forkline: SEQ_OUT_OF_RANGE: /);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('expected a session id and a text');
    expect(badInt.code).toBe(2);
    expect(badInt.stderr).toContain('--at must be an integer');
    expect(down.code).toBe(1);
    // Said while it retries (not a silent wait), then the error.
    expect(down.stderr).toMatch(/^forkline: cannot reach http:\/\/127\.0\.0\.1:9\/graphql \(.+\); trying again for up to 15 s/);
    expect(down.stderr.trim().split('\n').at(-1)).toMatch(/^forkline: NETWORK_ERROR: cannot reach/);
    // A subscription's lost server reads the same, never "[object Object]".
    expect(downFollow.code).toBe(1);
    expect(downFollow.stderr.trim().split('\n').at(-1)).toMatch(/^forkline: NETWORK_ERROR: cannot reach ws:\/\/127\.0\.0\.1:9\/graphql: ./);
    expect(noFile.code).toBe(1);
    expect(noFile.stderr).toContain('ENOENT');
    // Node's own usage message keeps its lines (not "\x0a" escapes) and says how to pass a negative value.
    expect(dashValue.code).toBe(2);
    expect(dashValue.stderr).not.toContain('\\x0a');
    expect(dashValue.stderr.split('\n')).toContain("To specify an option argument starting with a dash use '--at=-XYZ'.");
    // A page size out of range is named as the option, not as the server's query cost; 0 is not an empty list.
    for (const r of [firstZero, firstHuge]) expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(firstZero.stderr).toMatch(/^forkline: --first must be between 1 and 500, got 0\n/);
    expect(firstHuge.stderr).toMatch(/^forkline: --first must be between 1 and 500, got 5000\n/);
    const bad = path.join(tmp, 'bad.jsonl');
    fs.writeFileSync(bad, '{"format":"forkline.recording","version":4,"session":{"id":"s","title":"t"}}\n{"seq":0,"type":"turn/pause","data":{}}\n');
    const rejected = await cli(['import', bad]);
    expect(rejected.code).toBe(1);
    expect(rejected.stderr).toMatch(/^forkline: BAD_USER_INPUT: line 2: /);
  });
});

describe('forkline CLI: branching workflows', () => {
  /** A session with two answered turns; returns its id and the input id of the second. */
  async function twoTurns() {
    const id = (await app.ok(`mutation { createSession(input: { title: "cli branching", model: { provider: "scripted", model: "m1" } }) { id } }`))
      .createSession.id as string;
    await cli(['send', id, 'first', '--wait']);
    const { sendMessage } = await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "second" }) { inputId } }`, { id });
    await app.services.host.idle();
    return { id, second: sendMessage.inputId as string };
  }

  it('edit re-runs from right before an input and prints the answer (--wait)', async () => {
    const { id, second } = await twoTurns();
    const r = await cli(['edit', id, second, 'second, edited', '--model', 'scripted:m2', '--wait']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [summary, cut, answer] = lines(r.stdout);
    expect(summary).toMatch(/^ses_\S+\s+\S+\s+\d+ events .* cli branching {2}fork of /);
    expect(cut).toMatch(/^cut at seq 8; 0 synthetic closer\(s\); queued in_\S+; the child's agent writes from seq 10$/);
    expect(answer).toMatch(/^ses_\S+ {2}completed {2}Echo: second, edited$/);
    expect(app.models.scripted.lastRequest).toMatchObject({ model: 'm2' });

    const unknown = await cli(['edit', id, 'in_nope', 'x']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^forkline: BAD_USER_INPUT: input in_nope /);
  });

  it('fork with --model and --message starts the child at once', async () => {
    const { id } = await twoTurns();
    const r = await cli(['fork', id, '--at', '8', '--model', 'scripted:m3', '--message', 'from the fork', '--wait', '--json']);
    expect(r.code).toBe(0);
    const [fork, answer] = lines(r.stdout).map((l) => JSON.parse(l));
    expect(fork).toMatchObject({ cutSeq: 8, inputId: expect.stringMatching(/^in_/) });
    expect(answer).toMatchObject({ id: fork.session.id, reason: 'completed', text: 'Echo: from the fork', turn: 2 });
    expect(app.models.scripted.lastRequest).toMatchObject({ model: 'm3' });
  });

  it('fanout: one child per message, a single model for all; --wait prints every answer', async () => {
    const { id } = await twoTurns();
    const r = await cli(['fanout', id, '--anchor', '3', 'alpha', 'beta', 'gamma', '--model', 'scripted:m4', '--wait']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = lines(r.stdout);
    expect(out[0]).toBe(`cut at seq 8 of ${id}; 3 children:`);
    const answers = out.slice(4).map((l) => l.split(/ {2}/));
    expect(answers.map(([, reason, text]) => [reason.trim(), text])).toEqual([
      ['completed', 'Echo: alpha'],
      ['completed', 'Echo: beta'],
      ['completed', 'Echo: gamma'],
    ]);
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { children { edges { node { id lastAnswer { text } } } } } }`, { id });
    expect(session.children.edges.map((e: any) => e.node.id)).toEqual(answers.map(([child]) => child));

    const [mismatch, both, none] = await Promise.all([
      cli(['fanout', id, 'a', 'b', '--model', 'scripted:x', '--model', 'scripted:y', '--model', 'scripted:z']),
      cli(['fanout', id, 'a', '--at', '1', '--anchor', '2']),
      cli(['fanout', id]),
    ]);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toContain('2 messages for 3 variants');
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give --at or --anchor, not both');
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('expected at least one message or --model');
  });
});
