// What a server's tool schemas may cost the process (docs/mcp.md "Names, arguments, results"): a real SDK server over
// stdio lists schemas cheap to send and dear to compile or to check against. A `pattern` that backtracks
// catastrophically is checked in time linear in the argument (RE2): the call with 40 `a`s and a `!` is refused, not
// hours of the event loop; 100 `$ref`s to one subschema of 200 properties are compiled once, not inlined 100 times;
// a pattern RE2 does not take, and a schema of more objects and keys than are compiled, leave their tools out, saying why. The longest stall of the event loop while listing and calling is printed (no timing
// is asserted: speed is `npm run bench`'s).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
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
});
