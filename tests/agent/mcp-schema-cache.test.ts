// A server's tool schemas are compiled once per content (docs/mcp.md "Names,
// arguments, results"): a server that says its tools changed ten times a
// second is listed again at most once a second, and each list asked again
// compiles nothing it compiled before. Counted as the schemas sent to the
// schema worker to compile (agent/mcp/schema-checks.ts), against a real server
// over stdio.
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { ToolCatalog } from '../../src/agent/tool-catalog.ts';

const SERVER = fileURLToPath(new URL('../fixtures/mcp/relist-server.mjs', import.meta.url));
const scope = { tenant: 'default' };

describe('compiled MCP schemas', () => {
  it('a server that lists the same tools again and again: each list after the first compiles nothing', async () => {
    const catalog = new ToolCatalog(parseMcpConfig(JSON.stringify({ mcpServers: { relist: { command: process.execPath, args: [SERVER] } } })));
    try {
      const first = await catalog.tools(scope);
      const firstTool = first.find((t) => t.name === 'relist__tool_1');
      expect(firstTool).toBeDefined();
      const compiles = () => catalog.schemaChecks.stats.compiles;
      const compiled = compiles();
      // 200 input schemas and 100 output schemas.
      expect(compiled).toBeGreaterThanOrEqual(300);
      for (let i = 0; i < 3; i++) {
        await sleep(1100);
        const again = await catalog.tools(scope);
        // Listed again (the server said its tools changed): its tools made again, from what was compiled before.
        expect(again.find((t) => t.name === 'relist__tool_1')).not.toBe(firstTool);
        expect(again.filter((t) => t.server === 'relist')).toHaveLength(200);
      }
      expect(compiles()).toBe(compiled);
    } finally {
      await catalog.close();
    }
  }, 30_000);
});
