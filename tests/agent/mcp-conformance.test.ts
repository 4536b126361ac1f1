// `@modelcontextprotocol/conformance` client scenarios against forkline's MCP
// client: the runner starts its test server for a scenario (loopback) and runs
// tests/fixtures/mcp-conformance/client.ts, which lists and calls the server's
// tools through the ToolCatalog as the agent does. Each scenario's checks are
// read from the checks.json the runner writes (docs/mcp.md lists the results).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/process.ts';

const RUNNER = `${PROJECT_ROOT}node_modules/@modelcontextprotocol/conformance/dist/index.js`;
const FIXTURES = `${PROJECT_ROOT}tests/fixtures/mcp-conformance`;
// The runner splits this command on spaces (no path here has one) and appends the server's URL.
const CLIENT = `${process.execPath} --import ${PROJECT_ROOT}node_modules/tsx/dist/esm/index.mjs ${FIXTURES}/client.ts`;

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  errorMessage?: string;
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** Runs one client scenario (its results in a directory of its own); returns its checks and exit code. */
async function scenario(name: string): Promise<{ code: number | null; checks: Check[]; output: string; client: string }> {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-conformance-'));
  dirs.push(cwd);
  const args = [
    '--import',
    `${FIXTURES}/node20-fs-glob.mjs`,
    RUNNER,
    'client',
    '--command',
    CLIENT,
    '--scenario',
    name,
    '--timeout',
    '45000',
    '--output-dir',
    cwd,
  ];
  const child = spawn(process.execPath, args, { cwd, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const checksFile = findChecks(cwd);
  expect(checksFile, `no checks.json for ${name}:\n${output}`).toBeTruthy();
  const checks = (JSON.parse(fs.readFileSync(checksFile!, 'utf8')) as Check[]).filter((c) => c.status !== 'INFO');
  // What the client printed: the tools it was offered and each call's answer.
  const client = fs.readFileSync(path.join(path.dirname(checksFile!), 'stdout.txt'), 'utf8');
  return { code, checks, output, client };
}

function findChecks(dir: string): string | undefined {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name === 'checks.json') return path.join(entry.parentPath ?? entry.path, entry.name);
  }
  return undefined;
}

const statuses = (checks: Check[]) => Object.fromEntries(checks.map((c) => [c.id, c.status]));

describe('MCP conformance: client scenarios for tool calling', () => {
  it('initialize: the handshake (protocol version, client info)', async () => {
    const r = await scenario('initialize');
    expect(statuses(r.checks), r.output).toEqual({ 'mcp-client-initialization': 'SUCCESS' });
    expect(r.client).toBe('tools: none\n');
    expect(r.code).toBe(0);
  });

  it('tools_call: lists the tools and calls add_numbers over Streamable HTTP', async () => {
    const r = await scenario('tools_call');
    expect(statuses(r.checks), r.output).toEqual({ 'tool-add-numbers': 'SUCCESS' });
    // No annotations: side-effects (docs/mcp.md).
    expect(r.client).toContain('tools: conformance__add_numbers (side-effects)\n');
    expect(r.client).toContain('conformance__add_numbers → The sum of 2 and 3 is 5\n');
    expect(r.code).toBe(0);
  });

  it('sse-retry: a tool call whose SSE stream closes is resumed with Last-Event-ID and answered', async () => {
    const r = await scenario('sse-retry');
    const s = statuses(r.checks);
    expect(s, r.output).toMatchObject({ 'client-sse-graceful-reconnect': 'SUCCESS', 'client-sse-last-event-id': 'SUCCESS' });
    // The runner also times the reconnection against the stream's `retry`
    // field; on a loaded machine that check may say late: not asserted here.
    expect(Object.keys(s)).toContain('client-sse-retry-timing');
    expect(r.client).toContain('conformance__test_reconnection → Reconnection test completed successfully\n');
  });

  it('elicitation-sep1034-client-defaults: not supported (an agent has no user to ask), so the server is told "Method not found"', async () => {
    const r = await scenario('elicitation-sep1034-client-defaults');
    const general = r.checks.find((c) => c.id === 'client-elicitation-sep1034-general');
    expect(general, r.output).toMatchObject({ status: 'FAILURE', errorMessage: expect.stringContaining('Method not found') });
    expect(r.client).toContain('conformance__test_client_elicitation_defaults → Elicitation error: MCP error -32601: Method not found');
    expect(r.code).toBe(1);
  });
});
