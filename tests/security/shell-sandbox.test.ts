// A tenant's shell keeps forkline's secrets and other tenants' files out of
// reach (docs/operations.md "Threat model"): the real service (`src/main.ts`)
// started with secrets in its environment, the scripted model calling `shell`
// in real turns. Its data directory sits inside a git repository under
// /var/tmp (not /tmp, which the sandbox replaces anyway), as `.data/` sits in
// a checkout: neither the repository nor a sibling session's workspace may be
// seen from a workspace.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'shell-sandbox-token-0123456789';
const SECRETS = { FORKLINE_API_TOKENS: `${TOKEN}=acme`, OPENAI_API_KEY: 'sk-shell-sandbox-secret-key', ANTHROPIC_API_KEY: 'sk-ant-shell-sandbox-secret' };

let service: ServiceProcess;
let repo: string;
let databaseUrl: string;

beforeAll(async () => {
  repo = fs.mkdtempSync('/var/tmp/forkline-shell-repo-');
  execFileSync('git', ['init', '-q', repo]);
  databaseUrl = await createTestDatabase();
  service = await startService({
    env: {
      ...SECRETS,
      DATABASE_URL: databaseUrl,
      FORKLINE_DATA_DIR: path.join(repo, '.data'),
      FORKLINE_SHELL: 'on',
      FORKLINE_WORKSPACES_DIR: undefined,
      MODEL_PROVIDER: 'scripted',
    },
  });
});
afterAll(async () => {
  const code = await service?.stop();
  fs.rmSync(repo, { recursive: true, force: true });
  expect(code).toBe(0);
});

const gql = async (query: string, variables?: unknown) => {
  const r = await postGraphQL(service.url, query, variables, { authorization: `Bearer ${TOKEN}` });
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
};
const shell = (command: string) => `!call shell ${JSON.stringify({ command })}`;

/** Sends a turn and answers the contents of its shell results, once it ended. */
async function turn(sessionId: string, text: string): Promise<Array<[string, string]>> {
  const before = (await events(sessionId)).filter((e) => e.type === 'turn/end').length;
  await gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
  const all = await waitFor(
    async () => {
      const e = await events(sessionId);
      return e.filter((x) => x.type === 'turn/end').length > before ? e : null;
    },
    // Polled as a client keeping to its token's rate (20 a second, 100 at once): every 25 ms through a turn that took
    // 8 s on a loaded host, the next request was refused RATE_LIMITED.
    { what: 'the turn to end', timeoutMs: 40_000, intervalMs: 200 },
  );
  const ends = all.map((e, i) => (e.type === 'turn/end' ? i : -1)).filter((i) => i >= 0);
  return all
    .slice(ends.at(-2) ?? 0)
    .filter((e) => e.type === 'tool/result')
    .map((e) => [e.data.status, e.data.content]);
}
async function events(id: string): Promise<Array<{ type: string; data: any }>> {
  const page = await gql('query($id: ID!) { session(id: $id) { events(first: 200) { edges { node { type data } } } } }', { id });
  return page.session.events.edges.map((e: any) => e.node);
}
const createSession = async () => (await gql('mutation { createSession(input: { title: "shell" }) { id } }')).createSession.id as string;

describe('the shell (FORKLINE_SHELL=on, in bubblewrap)', () => {
  it("shows none of forkline's secrets: not in its environment, not in its parent's", async () => {
    const id = await createSession();
    const [env, parent, init] = await turn(
      id,
      [shell('env'), shell('cat /proc/$PPID/environ | tr "\\0" "\\n"; echo; ls /proc'), shell('cat /proc/1/environ | tr "\\0" "\\n"')].join('\n'),
    );
    for (const [status, content] of [env, parent, init]) {
      expect(status).toBe('ok');
      expect(content).toMatch(/^exit code 0/);
      expect(content).not.toMatch(/FORKLINE_|_API_KEY|DATABASE_URL|sk-shell-sandbox|sk-ant-shell|shell-sandbox-token/);
    }
    // The allow-list: HOME is the workspace, git fenced.
    expect(env[1]).toMatch(/^HOME=\/.+$/m);
    expect(env[1]).toMatch(/^GIT_CEILING_DIRECTORIES=\/.+$/m);
    expect(parent[1]).toMatch(/^PATH=/m); // the environ read is bwrap's own: our allow-list
  });

  it("cannot read a sibling session's workspace, nor list it", async () => {
    const a = await createSession();
    const b = await createSession();
    const [[written]] = await turn(a, shell('printf tenant-a-private > mine.txt && pwd'));
    expect(written).toBe('ok');
    const results = await turn(b, [shell(`cat ../${a}/mine.txt`), shell('ls -a ..; ls -a /'), shell(`find / -name mine.txt 2>/dev/null | head`)].join('\n'));
    const text = results.map(([, c]) => c).join('\n');
    expect(text).not.toContain('tenant-a-private');
    expect(results[0][1]).toMatch(/No such file or directory/);
    expect(results[1][1]).not.toContain(a);
    expect(results[2][1]).not.toContain('mine.txt');
  });

  it("finds no git repository around the workspace (forkline's own checkout stays out of reach)", async () => {
    const id = await createSession();
    const [[status, content]] = await turn(id, shell('git rev-parse --show-toplevel; ls -a ' + repo));
    expect(status).toBe('ok');
    expect(content).toMatch(/not a git repository/);
    expect(content).not.toContain(`${repo}\n`);
    expect(content).toMatch(/No such file or directory/);
    // …and by default the workspaces are not under the data directory inside it.
    expect(fs.existsSync(path.join(repo, '.data', 'workspaces'))).toBe(false);
  });
});
