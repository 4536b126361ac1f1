// What a server's tool schemas may cost the process (docs/mcp.md "Names, arguments, results"): a real SDK server over
// stdio lists schemas cheap to send and dear to compile or to check against. A `pattern` that backtracks
// catastrophically is checked in time linear in the argument (RE2): the call with 40 `a`s and a `!` is refused, not
// hours of the event loop; 100 `$ref`s to one subschema of 200 properties are compiled once, not inlined 100 times;
// a pattern RE2 does not take, and a schema of more objects and keys than are compiled, leave their tools out, saying why. The longest stall of the event loop while listing and calling is printed (no timing
// is asserted: speed is `npm run bench`'s).
// Schemas are compiled, and a call's arguments checked, in the schema worker (agent/mcp/schema-checks.ts):
// - the process's event loop goes on while a schema just under the size bounds compiles (0.1–0.6 s): before, the
//   compile ran on it, and not one timer fired from the server's answer to the tool being made;
// - a schema whose compile runs past the time bound (200 patterns RE2 takes 0.3 s each to compile: 5 s and more) has the
//   worker stopped and started again: its tool is not offered, logged, and another server's tool, compiled by the
//   worker before, is compiled again by the new one and checks its calls.
import { monitorEventLoopDelay } from 'node:perf_hooks';
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
  sessionId: 'ses_schema_cost',
  signal: new AbortController().signal,
  timeoutMs: 10_000,
  workspace: {} as ToolContext['workspace'],
  now: () => new Date(),
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('costly MCP tool schemas', () => {
  it('catastrophic patterns are checked in linear time; schemas RE2 or the size bound refuse leave their tools out, logged', async () => {
    const logged: string[] = [];
    const catalog = new ToolCatalog(parseMcpConfig(JSON.stringify({ mcpServers: { costly: { command: process.execPath, args: [SERVER] } } })), (msg, err) =>
      logged.push(`${msg} ${err instanceof Error ? err.message : ''}`),
    );
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    try {
      const tools = await catalog.tools(scope);
      const names = tools.filter((t) => t.server === 'costly').map((t) => t.name);
      expect(names.sort()).toEqual(['costly__inline_refs', 'costly__ok', 'costly__redos', 'costly__redos_keys']);
      expect(logged.find((l) => l.includes('"lookahead"'))).toMatch(/invalid perl operator/);
      expect(logged.find((l) => l.includes('"wide"'))).toMatch(/more than 1000 objects and keys/);

      const run = (name: string, args: unknown) => tools.find((t) => t.name === name)!.run(args, ctx());
      await expect(run('costly__redos', { s: `${'a'.repeat(40)}!` })).rejects.toThrow(/must match pattern/);
      await expect(run('costly__redos_keys', { [`${'a'.repeat(40)}!`]: 'x' })).rejects.toThrow(/must NOT have additional properties/);
      expect(await run('costly__redos', { s: 'a'.repeat(40) })).toBe('called redos');
      expect(await run('costly__ok', { s: 'abc' })).toBe('called ok');
      await expect(run('costly__ok', { s: 'ABC' })).rejects.toThrow(/must match pattern/);
      // Its 100 `$ref`s compiled as calls of one subschema: checked all the same.
      await expect(run('costly__inline_refs', { p7: { q3: 1 } })).rejects.toThrow(/p7\/q3 must be string/);
      expect(await run('costly__inline_refs', { p7: { q3: 'x' } })).toBe('called inline_refs');
    } finally {
      delay.disable();
      console.log(`costly schemas: longest event-loop stall ${(delay.max / 1e6).toFixed(0)} ms, rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`);
      await catalog.close();
    }
  }, 60_000);

  it("a server listing schemas dear to compile, of new content at every list_changed, gets its compile budget's time in the schema worker: the rest are not offered until the window ends", async () => {
    const logged: string[] = [];
    const budget = { ms: 300, windowMs: 6000 };
    const catalog = new ToolCatalog(
      parseMcpConfig(JSON.stringify({ mcpServers: { churn: { command: process.execPath, args: [SERVER, 'churn'] } } })),
      (msg) => logged.push(msg),
      { compileBudget: budget },
    );
    const compiles = () => catalog.schemaChecks.stats.compiles;
    const offered = async () => (await catalog.tools(scope)).filter((t) => t.server === 'churn').length;
    const relisted = () => new Promise((r) => setTimeout(r, 1100)); // the catalog lists again at most once a second
    try {
      // The window begins with the first compile: after `started`, before `listed`.
      const started = Date.now();
      const first = await offered();
      const listed = Date.now();
      const compiledFirst = compiles();
      // Some of the first list compiled within the budget, not all 20 (each is 0.1–0.6 s of CPU).
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThan(20);
      expect(compiledFirst).toBe(first); // the budget is asked before each compile: each schema compiled is offered, the rest not compiled
      const during: number[] = [];
      for (let i = 0; i < 2; i++) {
        await relisted();
        const n = await offered();
        if (Date.now() < started + budget.windowMs) during.push(n); // surely within the window
      }
      // Before: each list's 20 new schemas were compiled (4–12 s of the event loop a second, for as long as it churned).
      expect(during.length).toBeGreaterThan(0);
      expect(during.every((n) => n === 0)).toBe(true);
      expect(compiles()).toBe(compiledFirst);
      expect(logged.find((l) => l.includes('of its tools are not offered until'))).toMatch(
        /^MCP server "churn": \d+ of its tools are not offered until \S+: its server's schemas took more than 300 ms to compile within 6 s: not compiled now$/,
      );
      // Past the window the list is made again: some of the server's latest tools are offered.
      await new Promise((r) => setTimeout(r, Math.max(0, listed + budget.windowMs + 100 - Date.now())));
      await relisted();
      expect(await offered()).toBeGreaterThan(0);
    } finally {
      await catalog.close();
    }
  }, 60_000);
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
