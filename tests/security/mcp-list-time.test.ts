// How long an MCP server's tools/list may hold forkline (docs/operations.md
// "Memory and time"): every turn of a tenant waits for the tool lists of its
// servers, so the whole listing, every page of it, is held to the server's
// timeout. The hostile server is the SDK's own `Server` over stdio
// (tests/fixtures/mcp/hostile-list-server.mjs), answering each page well
// inside the timeout and naming another page each time; the turns are sent
// with sendMessage to the test app.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const LIST_SERVER = fileURLToPath(new URL('../fixtures/mcp/hostile-list-server.mjs', import.meta.url));
const TIMEOUT_MS = 2000;
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({
    mcp: parseMcpConfig(
      JSON.stringify({
        mcpServers: {
          // Each page 300 ms after it is asked for, each naming another: 100 pages took 30 s, each page inside the timeout.
          slow: { command: process.execPath, args: [LIST_SERVER], env: { HOSTILE_PAGES: 'slow' }, timeoutMs: TIMEOUT_MS },
          // The same server's tools on one page.
          fine: { command: process.execPath, args: [LIST_SERVER], timeoutMs: 10_000 },
        },
      }),
    ),
    maxTurnMs: 120_000,
  });
});
afterAll(async () => {
  await app?.close();
});

const { create, turn, results } = agentTurns(() => app, 'list-time');

describe('a tools/list that names another page forever, each page inside the timeout', () => {
  it("is held to the server's timeout as a whole: the server is FAILED saying so, and a turn waits that long, not 100 pages", async () => {
    let began = Date.now();
    const { toolServers } = await app.ok('{ toolServers { name status toolCount error } }');
    const listedMs = Date.now() - began;
    console.log(`tools/list of endless slow pages: ended in ${listedMs} ms`);
    expect(toolServers).toEqual([
      { name: 'slow', status: 'FAILED', toolCount: 0, error: expect.stringMatching(/^tools\/list did not end within 2000 ms \(\d pages read\): not listed$/) },
      { name: 'fine', status: 'READY', toolCount: expect.any(Number), error: null },
    ]);
    // Several times the timeout on a loaded machine; before, the 100 pages took 30 s.
    expect(listedMs).toBeLessThan(10_000);

    // A turn lists its tenant's servers again (a failed one is asked again on next use), and goes on with the others.
    const id = await create();
    began = Date.now();
    await turn(id, '!call fine__ok {}');
    const turnMs = Date.now() - began;
    console.log(`a turn beside it: ${turnMs} ms`);
    expect(await results(id)).toEqual([['fine__ok', 'ok', 'fine']]);
    expect(turnMs).toBeLessThan(10_000);
  });
});
