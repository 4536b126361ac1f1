// The opt-in shell tool (FORKLINE_SHELL=on, agent/shell-tool.ts): a command in
// the session's file workspace whose file changes are found by a walk and
// recorded with its result, so forks rewind them like the built-in file
// tools'; it sees none of forkline's environment, and a time limit kills it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
beforeAll(async () => {
  process.env.FORKLINE_TEST_SECRET = 'do-not-leak';
  app = await startTestApp({ shell: true, toolTimeoutMs: 1500, workspaceLimits: { maxBytes: 10_000, maxFiles: 10 } });
});
afterAll(async () => {
  delete process.env.FORKLINE_TEST_SECRET;
  await app.close();
});

const { create, turn, log, results } = agentTurns(() => app, 'shell');
const shell = (command: string) => `!call shell ${JSON.stringify({ command })}`;
const paths = async (id: string, atSeq?: number) =>
  (await app.ok(`query($id: ID!, $a: Int) { session(id: $id) { files(atSeq: $a) { path size } } }`, { id, a: atSeq })).session.files.map(
    (f: any) => `${f.path}:${f.size}`,
  );

describe('the shell tool', () => {
  it('is offered only when switched on', async () => {
    expect((await app.ok('{ tools { name effect } }')).tools).toContainEqual({ name: 'shell', effect: 'SIDE_EFFECTS' });
  });

  it('records what a command changed in the workspace; a fork before its result has the files as before, and is told so', async () => {
    const id = await create();
    await turn(id, '!call write_file {"path":"a.txt","content":"a"}');
    await turn(id, shell('mkdir -p d && printf hello > d/x.txt && rm a.txt && pwd'));
    const [, status, content] = (await results(id)).at(-1)!;
    expect(status).toBe('ok');
    expect(content).toMatch(/^exit code 0\n--- stdout ---\n\/.*\n$/);
    const change = (await log(id)).findLast((e) => e.type === 'plugin/files/change')!;
    expect(anyData(change).changes).toEqual([
      { path: 'a.txt', hash: null, size: 0 },
      { path: 'd/x.txt', hash: expect.stringMatching(/^[0-9a-f]{64}$/), size: 5 },
    ]);
    expect(await paths(id)).toEqual(['d/x.txt:5']);

    const call = (await log(id)).findLast((e) => e.type === 'model/message' && anyData(e).toolCalls.length)!;
    expect(anyData(call).toolCalls[0]).toMatchObject({ name: 'shell', effect: 'side-effects', files: 'also' });
    const fork = (
      await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } syntheticEvents { data } } }`, {
        i: { sessionId: id, atSeq: call.seq },
      })
    ).forkSession;
    const wording = fork.syntheticEvents[0].data.content as string;
    expect(wording).toContain('The files were restored to before this call; it did not run in this branch as far as the files go.');
    expect(wording).toContain('Outside the files: "shell" has side effects');
    expect(await paths(fork.session.id)).toEqual(['a.txt:1']);
    await turn(fork.session.id, shell('ls'));
    expect((await results(fork.session.id)).at(-1)).toEqual(['shell', 'ok', 'exit code 0\n--- stdout ---\na.txt\n']);
  });

  it('a command that leaves the workspace past its quota is an error, and its file changes are undone', async () => {
    const id = await create();
    await turn(id, '!call write_file {"path":"keep.txt","content":"keep"}');
    await turn(id, shell('head -c 20000 /dev/zero > big.bin && echo made') + '\n!then\n' + shell('ls'));
    const [made, listed] = (await results(id)).slice(-2);
    expect(made).toEqual([
      'shell',
      'error',
      "exit code 0\n--- stdout ---\nmade\n\n(the workspace quota is 10000 bytes, and the files came to 20004: the call's file changes were undone)",
    ]);
    expect(listed).toEqual(['shell', 'ok', 'exit code 0\n--- stdout ---\nkeep.txt\n']);
    expect(await paths(id)).toEqual(['keep.txt:4']);
    expect((await log(id)).filter((e) => e.type === 'plugin/files/change')).toHaveLength(1);
  });

  it("sees none of forkline's environment, reports a failing exit code, and is stopped at the time limit", async () => {
    const id = await create();
    await turn(id, [shell('env'), shell('echo oops >&2; exit 3'), shell('sleep 30')].join('\n'));
    const [env, failing, slow] = await results(id);
    expect(env[2]).not.toContain('do-not-leak');
    expect(env[2]).not.toContain('DATABASE');
    expect(failing).toEqual(['shell', 'ok', 'exit code 3\n--- stderr ---\noops\n']);
    expect(slow).toEqual(['shell', 'error', 'timed out after 1500 ms']);
  });
});
