// Deleting a tree of many forks holds the process's event loop only briefly
// (docs/operations.md "Memory and time", "Database time"): each deleted
// session's workspace was removed by starting `rm` for it, all at once, and
// starting a process holds the loop for tens of milliseconds in a large
// process — a tree of 200 forks held every other request of the process for
// seconds. Only workspaces that exist are removed now, one at a time.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ChildProcess } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const FORKS = 200;
let app: TestApp;
let root: string;

beforeAll(async () => {
  app = await startTestApp();
  root = (await app.ok(`mutation { createSession(input: { title: "tree" }) { id } }`)).createSession.id;
  let tip = root;
  for (let i = 0; i < FORKS; i++)
    tip = (await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id: tip })).forkSession.session.id;
}, 300_000);
afterAll(() => app?.close());

it(`deleting a chain of ${FORKS} forks does not hold the event loop for seconds`, async () => {
  // Every process this one starts goes through ChildProcess#spawn (execFile's too; @types/node leaves it out): counted.
  const proto = ChildProcess.prototype as unknown as { spawn: (...args: unknown[]) => unknown };
  const spawn = proto.spawn;
  let spawned = 0;
  proto.spawn = function (this: ChildProcess, ...args: unknown[]) {
    spawned++;
    return spawn.apply(this, args);
  };
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  try {
    const d = await app.ok(`mutation($id: ID!) { deleteSession(id: $id, withDescendants: true) { deletedSessionIds } }`, { id: root });
    // The deletion's NOTIFY reaches this process's listener just after the answer: give it time to be handled.
    await new Promise((r) => setTimeout(r, 1000));
    expect(d.deleteSession.deletedSessionIds.length).toBe(FORKS + 1);
  } finally {
    delay.disable();
    proto.spawn = spawn;
  }
  const longestMs = delay.max / 1e6;
  console.log(`a chain of ${FORKS} forks deleted: ${spawned} processes started, the loop held ${Math.round(longestMs)} ms at most`);
  // Before: every workspace's `rm` started in one go (201 processes, ~20-70 ms each). None of these forks has a workspace.
  expect(spawned).toBe(0);
  expect(longestMs).toBeLessThan(5000);
});
