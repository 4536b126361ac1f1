// MCP tool schemas are compiled, and a call's arguments checked, in the schema worker (agent/mcp/schema-checks.ts;
// docs/mcp.md "Names, arguments, results"), against a real SDK server over stdio (fixtures/mcp/costly-schema-server.mjs):
// - the process's event loop goes on while a schema just under the size bounds compiles (0.1–0.6 s): before, the
//   compile ran on it, and not one timer fired from the server's answer to the tool being made;
// - a schema whose compile runs past the time bound (200 patterns RE2 takes 0.3 s each to compile: a minute) has the
//   worker stopped and started again: its tool is not offered, logged, and another server's tool, compiled by the
//   worker before, is compiled again by the new one and checks its calls.
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { McpServerConnection } from '../../src/agent/mcp/mcp-server.ts';
import { ToolCatalog } from '../../src/agent/tool-catalog.ts';
import type { ToolContext } from '../../src/agent/tools.ts';

const SERVER = fileURLToPath(new URL('../fixtures/mcp/costly-schema-server.mjs', import.meta.url));
const scope = { tenant: 'default' };
const server = (...args: string[]) => ({ command: process.execPath, args: [SERVER, ...args] });

const ctx = (): ToolContext => ({
  sessionId: 'ses_schema_worker',
  signal: new AbortController().signal,
  timeoutMs: 10_000,
  workspace: {} as ToolContext['workspace'],
  now: () => new Date(),
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the MCP schema worker', () => {
  it("the event loop goes on while a server's schema compiles", async () => {
    // No time bound in the way: what is looked at is the event loop, not how long the compile takes.
    const catalog = new ToolCatalog(parseMcpConfig(JSON.stringify({ mcpServers: { costly: server('one') } })), () => {}, {
      schemaTimeBoundMs: 60_000,
    });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    // Timers fired from the server's answer on (its tools' schemas not compiled yet) until its tools are made.
    let ticksAtListed: number | undefined;
    const listTools = McpServerConnection.prototype.listTools;
    vi.spyOn(McpServerConnection.prototype, 'listTools').mockImplementation(async function (this: McpServerConnection) {
      const infos = await listTools.call(this);
      ticksAtListed = ticks;
      return infos;
    });
    try {
      const tools = await catalog.tools(scope);
      const ticksWhileMade = ticks - ticksAtListed!;
      expect(tools.map((t) => t.name)).toContain('costly__dear');
      // Before: 0 (the compile, 0.1–0.6 s, held the event loop from the answer to the tool).
      expect(ticksWhileMade).toBeGreaterThan(0);
      const dear = tools.find((t) => t.name === 'costly__dear')!;
      await expect(dear.run({ p3: 'y' }, ctx())).rejects.toThrow(/invalid arguments for costly__dear: data\/p3 must match pattern/);
      expect(await dear.run({ p3: 'x0_3' }, ctx())).toBe('called dear');
    } finally {
      clearInterval(timer);
      await catalog.close();
    }
  }, 60_000);

  it('a compile past the time bound stops the worker: its tool is not offered, and another server’s tool, compiled before, still checks its calls', async () => {
    const logged: string[] = [];
    const catalog = new ToolCatalog(
      parseMcpConfig(JSON.stringify({ mcpServers: { slow: server('slow'), ok: server() } })),
      (msg, err) => logged.push(`${msg}${err instanceof Error ? ` ${err.message}` : ''}`),
      { schemaTimeBoundMs: 1000 },
    );
    try {
      // The other server's tool is compiled by the first worker.
      const ok = (await catalog.find('ok__ok', scope))!;
      expect(ok).toBeDefined();
      await expect(ok.run({ s: 'ABC' }, ctx())).rejects.toThrow(/must match pattern/);
      expect(catalog.schemaChecks.stats.restarts).toBe(0);

      const slow = (await catalog.tools(scope)).filter((t) => t.server === 'slow').map((t) => t.name);
      // Its schema of a minute's compile is not offered; the tool listed after it is, compiled by the fresh worker.
      expect(slow).toEqual(['slow__plain']);
      expect(catalog.schemaChecks.stats.restarts).toBe(1);
      expect(logged).toContain('MCP schema worker stopped: compiling its schema took more than 1000 ms; a fresh one takes the requests after it');
      expect(logged.find((l) => l.startsWith('MCP server "slow"'))).toMatch(
        /^MCP server "slow": 1 of its tools are not offered until \S+: compiling its schema took more than 1000 ms: not compiled now$/,
      );

      // The fresh worker lost what the first compiled: the other server's schema is compiled again there when asked.
      const compiles = catalog.schemaChecks.stats.compiles;
      await expect(ok.run({ s: 'ABC' }, ctx())).rejects.toThrow(/invalid arguments for ok__ok: data\/s must match pattern/);
      expect(await ok.run({ s: 'abc' }, ctx())).toBe('called ok');
      expect(catalog.schemaChecks.stats.compiles).toBe(compiles + 1);
      const plain = (await catalog.find('slow__plain', scope))!;
      await expect(plain.run({ s: 1 }, ctx())).rejects.toThrow(/data\/s must be string/);
      expect(catalog.schemaChecks.stats.restarts).toBe(1);
    } finally {
      await catalog.close();
    }
  }, 60_000);
});
