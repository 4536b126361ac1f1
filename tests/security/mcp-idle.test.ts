// What a stdio MCP server can do to forkline once its call has returned
// (docs/mcp.md, docs/operations.md "Threat model"): start a daemon that leaves
// its process group, ignore SIGTERM, flood stdout with lines that are not
// messages. A real MCP SDK server (tests/fixtures/mcp/idle-server.mjs) on a
// connection made as the catalog makes one (McpServerConnection, in this
// process), sandboxed and not.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { McpServerConnection } from '../../src/agent/mcp/mcp-server.ts';
import { findBubblewrap, sandboxRunner } from '../../src/agent/workspace-sandbox.ts';
import { alive } from '../helpers/process.ts';
import { workspaceServer } from '../helpers/probe-mcp.ts';
import { waitFor } from '../helpers/wait.ts';

const IDLE = fileURLToPath(new URL('../fixtures/mcp/idle-server.mjs', import.meta.url));
let base: string;
const connections: McpServerConnection[] = [];
const daemons: number[] = [];

beforeAll(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-mcp-idle-'));
});
afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => c.close()));
  for (const pid of daemons.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
});
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

/** The idle server as a workspace server of a directory of its own (sandboxed or not), as the catalog starts one. */
function connect(sandboxed: boolean, env: Record<string, string> = {}) {
  const dir = fs.mkdtempSync(path.join(base, 'ws-'));
  const home = fs.mkdtempSync(path.join(base, 'home-'));
  const config = parseMcpConfig(JSON.stringify({ mcpServers: { idle: { ...workspaceServer(IDLE, sandboxed), env } } })).mcpServers.idle;
  const sandbox = sandboxed ? sandboxRunner(findBubblewrap()) : undefined;
  const connection = new McpServerConnection('idle', config, () => {}, dir, home, sandbox, 20_000);
  connections.push(connection);
  return { connection, dir };
}
const call = (c: McpServerConnection, name: string, args: Record<string, unknown> = {}, timeoutMs = 10_000) =>
  c.callTool(name, args, { signal: new AbortController().signal, timeoutMs }).then((r) => (r.content[0] as { text: string }).text);
const ticks = (dir: string) => (fs.existsSync(path.join(dir, 'daemon.txt')) ? fs.readFileSync(path.join(dir, 'daemon.txt'), 'utf8').length : 0);

describe('a daemon a server starts (it leaves the process group)', () => {
  it.each(['setsid', 'double'] as const)(
    "holding the server's stdout and stderr (%s): once the server is stopped it is seen gone, and the next call starts it again",
    async (how) => {
      const { connection } = connect(false);
      const daemon = Number(/^daemon (\d+)$/.exec(await call(connection, 'daemon', { how, stdio: true }))![1]);
      daemons.push(daemon);
      const before = await call(connection, 'pid');
      connection.stop('stopped: past its quota');
      // Before: the pipes the daemon held never closed, so the server was never seen gone: every later call failed
      // "Not connected" at once, and the server was never started again.
      const after = await waitFor(() => call(connection, 'pid').catch(() => undefined), { what: 'a call to a new server', timeoutMs: 10_000, intervalMs: 200 });
      expect(after).toMatch(/^pid \d+$/);
      expect(after).not.toBe(before);
    },
  );

  it.each(['setsid', 'double'] as const)('sandboxed (%s), ends with the server: its PID namespace goes with it', async (how) => {
    const { connection, dir } = connect(true);
    await call(connection, 'daemon', { how, stdio: false });
    await waitFor(() => ticks(dir) > 0, { what: 'the daemon to write' });
    connection.stop('stopped: past its quota');
    await new Promise((r) => setTimeout(r, 500));
    const then = ticks(dir);
    await new Promise((r) => setTimeout(r, 1000));
    expect(ticks(dir)).toBe(then);
  });

  it('unsandboxed, outlives the server: nothing but a sandbox ends it (docs/operations.md says so)', async () => {
    const { connection, dir } = connect(false);
    const daemon = Number(/^daemon (\d+)$/.exec(await call(connection, 'daemon', { how: 'double', stdio: false }))![1]);
    daemons.push(daemon);
    connection.stop('stopped: past its quota');
    await new Promise((r) => setTimeout(r, 500));
    const then = ticks(dir);
    await waitFor(() => ticks(dir) > then, { what: 'the daemon to write on' });
    expect(alive(daemon)).toBe(true);
  });
});

describe('a server that ignores SIGTERM', () => {
  it('is killed once its grace is out when it is closed', async () => {
    const { connection } = connect(false, { IGNORE_TERM: '1' });
    const pid = Number(/^pid (\d+)$/.exec(await call(connection, 'pid'))![1]);
    const started = Date.now();
    await connection.close();
    // Its stdin ended, then SIGTERM, each given 2 s; then SIGKILL to its process group.
    await waitFor(() => !alive(pid), { what: 'the server to be gone', timeoutMs: 3000 });
    console.log(`a server ignoring SIGTERM was gone ${Date.now() - started} ms after its close began`);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('stdout flooded with lines that are not messages, while no call runs', () => {
  it('is read at the unasked rate: what the server writes waits in its pipe, costing this process little CPU or memory', async () => {
    const stats = path.join(base, 'garbage.txt');
    const { connection } = connect(false, { IDLE_STATS: stats });
    expect(await call(connection, 'garbage')).toBe('writing garbage');
    global.gc?.();
    const heap = process.memoryUsage().heapUsed;
    const cpu = process.cpuUsage();
    await new Promise((r) => setTimeout(r, 3000));
    const used = process.cpuUsage(cpu);
    const cpuMs = (used.user + used.system) / 1000;
    const written = fs.existsSync(stats) ? Number(fs.readFileSync(stats, 'utf8')) : 0;
    const heapMB = (process.memoryUsage().heapUsed - heap) / 1e6;
    console.log(`3 s of stdout lines that are no message: ${written} bytes written, ${Math.round(cpuMs)} ms of CPU, heap ${heapMB.toFixed(1)} MB`);
    // Before: parsed as fast as they came, each an error: 8.5 MB in 3 s, about 1,500 ms of CPU (half of one; 700 ms
    // on a loaded machine). Loaded here: 40 ms.
    expect(cpuMs).toBeLessThan(300);
    expect(written).toBeLessThan(2 * 1024 * 1024);
    expect(heapMB).toBeLessThan(50);
  });
});
