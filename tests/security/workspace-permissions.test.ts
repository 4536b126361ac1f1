// What a command may do to the permissions of its workspace's files, and
// what forkline does after it (docs/files.md "Where the files live",
// docs/operations.md "Threat model": Files and workspaces). Forkline runs as
// an OS user without root's privileges, as in production (the `postgres`
// user when the tests run as root, which no permission would stop): a
// directory a command left unreadable or unwritable to its owner must not
// keep forkline from removing the workspace and making it again, nor from
// removing it when its session is deleted.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';

/** The `postgres` OS user when we are root; else we already run without root's privileges. */
function unprivileged(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout);
  return { uid: id('-u'), gid: id('-g') };
}

let service: ServiceProcess;
let workspaces: string;

beforeAll(async () => {
  const user = unprivileged();
  workspaces = fs.mkdtempSync(path.join(os.tmpdir(), 'workspace-permissions-'));
  if (user) fs.chownSync(workspaces, user.uid, user.gid);
  service = await startService({
    user,
    env: {
      DATABASE_URL: await createTestDatabase(),
      FORKLINE_SHELL: 'unsandboxed',
      FORKLINE_API_TOKENS: undefined,
      FORKLINE_WORKSPACES_DIR: workspaces,
      MODEL_PROVIDER: 'scripted',
    },
  });
}, 120_000);
afterAll(async () => {
  await service?.stop();
  spawnSync('chmod', ['-R', 'u+rwX', workspaces]);
  fs.rmSync(workspaces, { recursive: true, force: true });
});

const gql = async (query: string, variables?: unknown) => {
  const r = await postGraphQL(service.url, query, variables);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
};

/** Sends `text` as a turn and answers its tool results, once it ended. */
async function turn(id: string, text: string): Promise<Array<{ status: string; content: string }>> {
  const ended = async () => (await events(id)).filter((e) => e.type === 'turn/end').length;
  const before = await ended();
  await gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
  await waitFor(async () => (await ended()) > before, { what: 'the turn to end', timeoutMs: 60_000 });
  const all = await events(id);
  const from = all.map((e) => e.type).lastIndexOf('turn/start');
  return all.slice(from).flatMap((e) => (e.type === 'tool/result' ? [{ status: e.data.status, content: e.data.content }] : []));
}
async function events(id: string): Promise<Array<{ type: string; data: any }>> {
  const page = await gql('query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { type data } } } } }', { id });
  return page.session.events.edges.map((e: any) => e.node);
}
const shell = (command: string) => `!call shell ${JSON.stringify({ command })}`;
const call = (name: string, args: unknown) => `!call ${name} ${JSON.stringify(args)}`;

describe('a directory a command leaves without permissions for its owner', () => {
  it.each([
    ['unreadable (chmod 000)', 'chmod 000 a'],
    ['unwritable (chmod 500)', 'chmod 500 a/b'],
  ])(
    '%s: the workspace is made again for the next call, and removed with its session',
    async (_name, chmod) => {
      const id = (await gql('mutation { createSession(input: { title: "perms" }) { id } }')).createSession.id as string;
      await turn(id, call('write_file', { path: 'keep.txt', content: 'kept\n' }));
      // The command's changes are refused or recorded; either way the directory must stay forkline's to remove.
      await turn(id, shell(`mkdir -p a/b && echo x > a/b/f && ${chmod}`));
      // A rewind to before the command: a fork makes its own directory; the session itself is made again by an undo or kept.
      const [written] = await turn(id, `${call('write_file', { path: 'after.txt', content: 'after\n' })}\n!then\n${call('read_file', { path: 'keep.txt' })}`);
      // Before: "tool failed: Command failed: rm -rf … Permission denied", at every later call of the session's file tools.
      expect(written).toEqual({ status: 'ok', content: expect.stringMatching(/^(created|wrote) after\.txt/) });
      const dir = path.join(workspaces, id);
      await gql('mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id });
      // Before: the directory stayed on disk for good, counted toward no tenant's total.
      await waitFor(async () => !fs.existsSync(dir), { what: "the deleted session's directory to be removed", timeoutMs: 10_000 });
    },
    120_000,
  );
});
