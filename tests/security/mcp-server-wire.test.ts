// What an MCP server's side of the wire may make forkline do (docs/operations.md
// "Threat model", "Memory and time"), through the test app and turns sent with
// sendMessage:
// - how long its tools/list may hold forkline: every turn of a tenant waits
//   for the tool lists of its servers, so the whole listing, every page of it,
//   is held to the server's timeout. The server is the SDK's own `Server` over
//   stdio (tests/fixtures/mcp/hostile-list-server.mjs), answering each page
//   well inside the timeout and naming another page each time;
// - what its errors may repeat: a Streamable HTTP server answering 401 with a
//   body that quotes the Authorization header its config has forkline send
//   does not put that secret in `toolServers` or in a call's result.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { REDACTED } from '../../src/core/secrets.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const LIST_SERVER = fileURLToPath(new URL('../fixtures/mcp/hostile-list-server.mjs', import.meta.url));
const SECRET = 'mcp-secret-0123456789';
let app: TestApp;
let echo: http.Server;

/**
 * A Streamable HTTP MCP server by hand that answers 401 quoting the Authorization header it was sent: every request
 * at /locked, only tools/call at /calls (it starts and lists one tool, `ok`).
 */
async function echoing(req: http.IncomingMessage, res: http.ServerResponse) {
  let body = '';
  for await (const chunk of req) body += chunk;
  const message = body ? JSON.parse(body) : undefined;
  const refuse = () => res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `invalid token: ${req.headers.authorization}` }));
  if (req.url === '/locked' || message?.method === 'tools/call') return refuse();
  if (req.method !== 'POST') return void res.writeHead(405).end();
  if (message?.id === undefined) return void res.writeHead(202).end();
  const result =
    message.method === 'initialize'
      ? { protocolVersion: message.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'echo', version: '1' } }
      : message.method === 'tools/list'
        ? { tools: [{ name: 'ok', inputSchema: { type: 'object', properties: {} } }] }
        : {};
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
}

beforeAll(async () => {
  echo = http.createServer((req, res) => void echoing(req, res).catch(() => res.destroy()));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
  const headers = { authorization: `Bearer ${SECRET}` };
  app = await startTestApp({
    mcp: parseMcpConfig(
      JSON.stringify({
        mcpServers: {
          // Each page 300 ms after it is asked for, each naming another: 100 pages took 30 s, each page inside the timeout.
          slow: { command: process.execPath, args: [LIST_SERVER], env: { HOSTILE_PAGES: 'slow' }, timeoutMs: 2000 },
          // The same server's tools on one page.
          fine: { command: process.execPath, args: [LIST_SERVER], timeoutMs: 10_000 },
          locked: { type: 'http', url: `${base}/locked`, headers, timeoutMs: 3000 },
          calls: { type: 'http', url: `${base}/calls`, headers, timeoutMs: 3000 },
        },
      }),
    ),
    maxTurnMs: 120_000,
  });
});
afterAll(async () => {
  await app?.close();
  echo?.closeAllConnections();
  await new Promise((r) => echo?.close(r));
});

const { create, turn, results } = agentTurns(() => app, 'mcp-wire');
const statuses = async () => (await app.ok('{ toolServers { name status toolCount error } }')).toolServers as Array<Record<string, unknown>>;

describe('a tools/list that names another page forever, each page inside the timeout', () => {
  it("is held to the server's timeout as a whole: the server is FAILED saying so, and a turn waits that long, not 100 pages", async () => {
    let began = Date.now();
    const listed = await statuses();
    const listedMs = Date.now() - began;
    console.log(`tools/list of endless slow pages: ended in ${listedMs} ms`);
    expect(listed.filter((s) => s.name === 'slow' || s.name === 'fine')).toEqual([
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

describe('a server whose 401 quotes the Authorization header its config sends', () => {
  it("does not put the header's secret in toolServers, nor in the result of a call it refuses", async () => {
    const locked = (await statuses()).find((s) => s.name === 'locked')!;
    expect(locked).toMatchObject({ status: 'FAILED', error: expect.stringContaining(`invalid token: ${REDACTED}`) });
    expect(JSON.stringify(locked)).not.toContain(SECRET);

    const id = await create();
    await turn(id, '!call calls__ok {}');
    const [[name, status, content]] = await results(id);
    expect([name, status]).toEqual(['calls__ok', 'error']);
    expect(content).toContain(`invalid token: ${REDACTED}`);
    expect(content).not.toContain(SECRET);
  });
});
