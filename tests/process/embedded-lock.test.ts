// One forkline per embedded data directory: a second start on a live one
// refuses and names the running process, leaving it serving; after a crash —
// of forkline alone, or of forkline and its Postgres — the next start recovers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { alive, postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';

const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-lock-'));
fs.chmodSync(folder, 0o755); // the embedded Postgres runs as another user when we are root
const env = { DATABASE_URL: undefined, FORKLINE_DATA_DIR: undefined };
const running: ServiceProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGTERM')));
  fs.rmSync(folder, { recursive: true, force: true });
});

const start = async () => {
  const p = await startService({ cwd: folder, env });
  running.push(p);
  return p;
};
const postmasterPid = () => Number(fs.readFileSync(path.join(folder, '.data', 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
const title = async (p: ServiceProcess, id: string) =>
  (await postGraphQL(p.url, 'query($id: ID!) { session(id: $id) { title } }', { id })).body.data.session?.title;

describe('the embedded data directory', () => {
  it('a second start on a live data directory refuses, naming the running one, which keeps serving', async () => {
    const first = await start();
    const id = (await postGraphQL(first.url, 'mutation { createSession(input: { title: "first" }) { id } }')).body.data.createSession.id;
    const pgPid = postmasterPid();
    const second = startService({ cwd: folder, env, timeoutMs: 30_000 });
    await expect(second).rejects.toThrow(new RegExp(`exited with 1 before serving:[\\s\\S]*another forkline \\(pid ${first.child.pid}\\) is running on`));
    expect(alive(pgPid)).toBe(true);
    expect(postmasterPid()).toBe(pgPid);
    expect(await title(first, id)).toBe('first');
    expect(await first.stop('SIGTERM')).toBe(0);
    expect(fs.existsSync(path.join(folder, '.data', 'forkline.lock'))).toBe(false);
  });

  it('after SIGKILL of forkline alone, the next start stops the orphaned Postgres and serves the data', async () => {
    const a = await start();
    const id = (await postGraphQL(a.url, 'mutation { createSession(input: { title: "orphan" }) { id } }')).body.data.createSession.id;
    const pgPid = postmasterPid();
    a.child.kill('SIGKILL');
    await a.exited;
    expect(alive(pgPid)).toBe(true); // left running by the killed process
    const b = await start();
    expect(await title(b, id)).toBe('orphan');
    expect(alive(pgPid)).toBe(false);
    expect(await b.stop('SIGTERM')).toBe(0);
  });

  it('after SIGKILL of both forkline and its Postgres, the next start recovers', async () => {
    const a = await start();
    const id = (await postGraphQL(a.url, 'mutation { createSession(input: { title: "both" }) { id } }')).body.data.createSession.id;
    const pgPid = postmasterPid();
    a.child.kill('SIGKILL');
    process.kill(pgPid, 'SIGKILL');
    await a.exited;
    const b = await start();
    expect(await title(b, id)).toBe('both');
    expect(await b.stop('SIGINT')).toBe(0);
  });
});
