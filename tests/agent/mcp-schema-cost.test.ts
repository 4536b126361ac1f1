// What a server's tool schemas may cost the process (docs/mcp.md "Names, arguments, results"): a real SDK server over
// stdio lists schemas cheap to send and dear to compile or to check against. A `pattern` that backtracks
// catastrophically is checked in time linear in the argument (RE2): the call with 40 `a`s and a `!` is refused, not
// hours of the event loop; 100 `$ref`s to one subschema of 200 properties are compiled once, not inlined 100 times;
// a pattern RE2 does not take, and a schema of more objects and keys than are compiled, leave their tools out, saying why. The longest stall of the event loop while listing and calling is printed (no timing
// is asserted: speed is `npm run bench`'s).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { ToolCatalog } from '../../src/agent/tool-catalog.ts';
import type { ToolContext } from '../../src/agent/tools.ts';

const SERVER = fileURLToPath(new URL('../fixtures/mcp/costly-schema-server.mjs', import.meta.url));
const scope = { tenant: 'default' };

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
