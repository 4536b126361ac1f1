// Where no sandbox can be made the shell is refused unless the operator says
// FORKLINE_SHELL=unsandboxed; even then, and for every workspace MCP server,
// what runs in a workspace gets an allow-listed environment (none of
// forkline's secrets, HOME = the workspace) and git finds no repository around
// it (docs/operations.md "Threat model"). Real turns, the scripted model calling.
// Workspaces sit inside a git repository under /var/tmp, as under a checkout's .data/.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';

const ENV_SERVER = fileURLToPath(new URL('../fixtures/mcp/env-server.mjs', import.meta.url));
const SECRET = /FORKLINE_|_API_KEY|DATABASE_URL|shell-env-secret/;
const shell = (command: string) => `!call shell ${JSON.stringify({ command })}`;

let repo: string;
const apps: TestApp[] = [];
const logged: string[] = [];
beforeAll(() => {
  process.env.FORKLINE_TEST_SECRET = 'shell-env-secret';
  process.env.OPENAI_API_KEY = 'shell-env-secret-key';
  // Workspaces inside a git repository, as under a checkout's .data/.
  repo = fs.mkdtempSync('/var/tmp/forkline-shell-env-');
  execFileSync('git', ['init', '-q', repo]);
});
afterAll(async () => {
  delete process.env.FORKLINE_TEST_SECRET;
  delete process.env.OPENAI_API_KEY;
  await Promise.all(apps.map((a) => a.close()));
  fs.rmSync(repo, { recursive: true, force: true });
});

async function start(name: string, opts: Parameters<typeof startTestApp>[0]) {
  const workspacesDir = path.join(repo, name, 'workspaces');
  fs.mkdirSync(workspacesDir, { recursive: true });
  const app = await startTestApp({ workspacesDir, log: (m) => logged.push(m), ...opts });
  apps.push(app);
  return { app, workspacesDir, ...agentTurns(() => app, name) };
}

describe('a shell without a sandbox', () => {
  it('is refused, to the model and in the start-up log, when FORKLINE_SHELL=on finds no bubblewrap', async () => {
    const { create, turn, results } = await start('refused', { shell: 'on', bwrap: '/nonexistent/bwrap' });
    expect(logged.join('\n')).toMatch(/FORKLINE_SHELL=on but .*\/nonexistent\/bwrap.*every shell call is refused.*FORKLINE_SHELL=unsandboxed/s);
    const id = await create();
    await turn(id, shell('echo ran > ran.txt; echo ran'));
    const [[name, status, content]] = await results(id);
    expect([name, status]).toEqual(['shell', 'error']);
    expect(content).toMatch(/^the shell is switched off on this server: .*bwrap.*FORKLINE_SHELL=unsandboxed/);
    expect(content).not.toContain('exit code');
  });

  it('runs only when the operator says FORKLINE_SHELL=unsandboxed, with none of the secrets and git fenced out of the repository around it', async () => {
    const { create, turn, results, workspacesDir } = await start('unsandboxed', { shell: 'unsandboxed', bwrap: '/nonexistent/bwrap' });
    expect(logged.join('\n')).toMatch(/FORKLINE_SHELL=unsandboxed: shell commands run as this OS user with no sandbox/);
    const id = await create();
    await turn(id, [shell('env'), shell('git rev-parse --show-toplevel')].join('\n'));
    const [[, envStatus, env], [, gitStatus, git]] = await results(id);
    expect(envStatus).toBe('ok');
    expect(env).not.toMatch(SECRET);
    expect(env).toContain(`HOME=${path.join(workspacesDir, id)}\n`);
    expect(gitStatus).toBe('ok');
    expect(git).toMatch(/not a git repository/);
    expect(git).not.toContain(repo);
  });
});

describe('a workspace MCP server', () => {
  it("starts with the allow-list and what the operator's config names in env: a private HOME, no secret, git fenced", async () => {
    const { create, turn, results, workspacesDir } = await start('mcp', {
      mcp: {
        mcpServers: {
          probe: {
            command: process.execPath,
            args: [ENV_SERVER],
            cwd: '${workspace}',
            workspace: 'also',
            env: { PROBE_SETTING: 'named-by-operator' },
            trusted: true,
            tools: {},
          },
        },
      },
    });
    const id = await create();
    await turn(id, '!call probe__env {}');
    const [[name, status, content]] = await results(id);
    expect([name, status]).toEqual(['probe__env', 'ok']);
    const { cwd, env } = JSON.parse(content);
    expect(cwd).toBe(path.join(workspacesDir, id));
    // HOME: a private directory of forkline's, neither the operator's (dotfiles, credentials) nor the workspace.
    expect(env.HOME).toMatch(/\/forkline-mcp-home-/);
    expect(env.HOME).not.toBe(process.env.HOME);
    expect(env.HOME.startsWith(workspacesDir)).toBe(false);
    expect(env.PROBE_SETTING).toBe('named-by-operator');
    expect(env.GIT_CEILING_DIRECTORIES).toBe(workspacesDir);
    expect(Object.keys(env).join('\n')).not.toMatch(SECRET);
    expect(JSON.stringify(env)).not.toContain('shell-env-secret');
  });
});
