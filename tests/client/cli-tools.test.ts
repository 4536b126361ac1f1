// `forkline tools` against a real server with MCP servers configured as an
// operator would (the reference server-everything and server-memory over
// stdio), one of them only for tenant "alpha": the catalog, a session's set,
// changing it, and a tenant that may not name another tenant's server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import type { TestApp } from '../helpers/app.ts';
import { A, TOKEN_A, TOKEN_B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { runCli } from '../helpers/cli.ts';

const require = createRequire(import.meta.url);
const serverScript = (pkg: string) => require.resolve(`@modelcontextprotocol/${pkg}/dist/index.js`);

const lines = (s: string) => s.trim().split('\n').filter(Boolean);

let app: TestApp;
let dir: string;
const as = (token: string) => (args: string[]) => runCli(app.url, args, { FORKLINE_TOKEN: token });
const alpha = as(TOKEN_A);
const beta = as(TOKEN_B);

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-cli-tools-'));
  const config = path.join(dir, 'mcp.json');
  fs.writeFileSync(
    config,
    JSON.stringify({
      mcpServers: {
        everything: { command: process.execPath, args: [serverScript('server-everything'), 'stdio'] },
        memory: {
          command: process.execPath,
          args: [serverScript('server-memory')],
          env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') },
          tenants: ['alpha'],
        },
      },
    }),
  );
  app = await startTwoTenantApp({ mcp: loadMcpConfig(config) });
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function newSession(token: string): Promise<string> {
  const r = await app.gql('mutation { createSession(input: {title: "cli tools"}) { id } }', {}, { authorization: `Bearer ${token}` });
  return r.data.createSession.id;
}

/** A table line's columns (two or more spaces apart). */
const columns = (line: string) => line.split(/ {2,}/);

describe('forkline tools', () => {
  it('lists the catalog: name, server, effect, description (built-ins first, - for their server); --json one tool per line', async () => {
    const [table, json] = await Promise.all([alpha(['tools']), alpha(['tools', '--json'])]);
    expect(table.code, table.stderr).toBe(0);
    const rows = lines(table.stdout).map(columns);
    expect(rows[0]).toEqual(['clock', '-', 'read-only', expect.stringMatching(/\S/)]);
    expect(rows.find((r) => r[0] === 'everything__echo')).toEqual(['everything__echo', 'everything', 'read-only', expect.stringMatching(/echo/i)]);
    expect(rows.some((r) => r[0].startsWith('memory__') && r[1] === 'memory')).toBe(true);
    // Columns line up: every effect starts at the same offset.
    const offsets = lines(table.stdout).map((l) => l.search(/ (read-only|idempotent|side-effects)\b/));
    expect(new Set(offsets).size).toBe(1);

    expect(json.code).toBe(0);
    const tools = lines(json.stdout).map((l) => JSON.parse(l));
    expect(tools.map((t) => t.name)).toEqual(rows.map((r) => r[0]));
    expect(tools.find((t) => t.name === 'everything__echo')).toMatchObject({ server: 'everything', effect: 'READ_ONLY', description: expect.any(String) });
    expect(tools.find((t) => t.name === 'note_write')).toMatchObject({ server: null });
  });

  it("shows a session's set and changes it with --set; '' offers none", async () => {
    const id = await newSession(TOKEN_A);
    const all = await alpha(['tools', id, '--json']);
    expect(all.code).toBe(0);
    expect(lines(all.stdout).length).toBeGreaterThan(5); // no session/tools event yet: everything

    const set = await alpha(['tools', id, '--set', 'memory__*, clock']);
    expect(set.code, set.stderr).toBe(0);
    const names = lines(set.stdout).map((l) => columns(l)[0]);
    expect(names[0]).toBe('clock');
    expect(names.length).toBeGreaterThan(1);
    expect(names.slice(1).every((n) => n.startsWith('memory__'))).toBe(true);
    // Recorded in the log: reading it again gives the same set.
    expect((await alpha(['tools', id])).stdout).toBe(set.stdout);

    const none = await alpha(['tools', id, '--set', '']);
    expect(none).toMatchObject({ code: 0, stdout: '', stderr: 'no tools\n' });
    const { data } = await app.gql('query($id: ID!) { session(id: $id) { events(first: 50) { edges { node { type data } } } } }', { id }, A);
    expect(
      data.session.events.edges
        .map((e: any) => e.node)
        .filter((e: any) => e.type === 'session/tools')
        .map((e: any) => e.data.tools),
    ).toEqual([['memory__*', 'clock'], []]);
  });

  it("keeps a tenant to its servers: another tenant's are neither listed nor settable", async () => {
    const catalog = await beta(['tools']);
    expect(catalog.code).toBe(0);
    const names = lines(catalog.stdout).map((l) => columns(l)[0]);
    expect(names).toContain('everything__echo');
    expect(names.some((n) => n.startsWith('memory__'))).toBe(false);

    const id = await newSession(TOKEN_B);
    const refused = await beta(['tools', id, '--set', 'memory__*']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^forkline: BAD_USER_INPUT: .*no MCP server "memory" is configured for this tenant/);
    // And alpha's session is not beta's to read or change.
    const alphaSession = await newSession(TOKEN_A);
    const foreign = await beta(['tools', alphaSession]);
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toMatch(/^forkline: SESSION_NOT_FOUND: /);
  });

  it('fails clearly: usage errors, a missing session, a set that names no tool', async () => {
    const id = await newSession(TOKEN_A);
    const [noId, tooMany, missing, bad] = await Promise.all([
      alpha(['tools', '--set', 'clock']),
      alpha(['tools', id, 'extra']),
      alpha(['tools', 'ses_missing']),
      alpha(['tools', id, '--set', 'shell']),
    ]);
    expect(noId.code).toBe(2);
    expect(noId.stderr).toContain("--set changes a session's tools");
    expect(tooMany.code).toBe(2);
    expect(tooMany.stderr).toContain('expected at most a session id');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^forkline: SESSION_NOT_FOUND: session ses_missing not found/);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^forkline: BAD_USER_INPUT: tools: "shell" is not a tool/);
  });
});
