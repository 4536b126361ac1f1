// What a hostile MCP server's many small messages cost forkline in time, not
// only in bytes (docs/operations.md "Memory and time"): the SDK parses and
// handles each message as it reads it, in the event loop every session,
// subscription and request shares. A real SDK server (tests/fixtures/mcp/flood-server.mjs,
// over Streamable HTTP and over stdio) floods a connection made as the catalog
// makes one (McpServerConnection, in this process), while this process's
// event loop delay (perf_hooks) and CPU time are measured.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { McpServerConnection } from '../../src/agent/mcp/mcp-server.ts';
import { ToolCatalog } from '../../src/agent/tool-catalog.ts';
import type { ToolContext } from '../../src/agent/tool-definition.ts';
import { waitFor } from '../helpers/wait.ts';

const FLOOD = fileURLToPath(new URL('../fixtures/mcp/flood-server.mjs', import.meta.url));
/** A server speaking Streamable HTTP by hand, for answers the SDK's server does not give (a JSON batch). */
const HAND_WRITTEN = fileURLToPath(new URL('../fixtures/mcp/hostile-http-server.mjs', import.meta.url));
let dir: string;
let web: ChildProcess;
let webUrl: string;
const logs: string[] = [];
const connections: McpServerConnection[] = [];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-mcp-flood-'));
  web = spawn(process.execPath, [FLOOD, 'http'], {
    env: { PATH: process.env.PATH, FLOOD_STATS: path.join(dir, 'web.json') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  webUrl = await new Promise<string>((resolve, reject) => {
    web.stdout!.on('data', (b: Buffer) => {
      const m = /listening (\d+)/.exec(String(b));
      if (m) resolve(`http://127.0.0.1:${m[1]}/mcp`);
    });
    web.once('exit', (code) => reject(new Error(`the flood server exited ${code}`)));
  });
});

afterAll(async () => {
  await Promise.all(connections.map((c) => c.close()));
  web?.kill();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** A connection to the flood server as FORKLINE_MCP_CONFIG would make it: over HTTP, or over stdio noting its stats in `<name>.json`. */
function connect(name: string, over: 'http' | 'stdio' | URL, env: Record<string, string> = {}) {
  const server =
    over === 'stdio'
      ? { command: process.execPath, args: [FLOOD], env: { FLOOD_STATS: statsFile(name), ...env } }
      : { type: 'http', url: over === 'http' ? webUrl : over.href };
  const config = parseMcpConfig(JSON.stringify({ mcpServers: { [name]: server } })).mcpServers[name];
  const connection = new McpServerConnection(name, config, (msg) => logs.push(msg), undefined, undefined, undefined, 20_000);
  connections.push(connection);
  return connection;
}
const statsFile = (name: string) => path.join(dir, `${name}.json`);
const statsOf = (name: string) => JSON.parse(fs.readFileSync(statsFile(name), 'utf8')) as { sent: number; cancelled: number; answered: number };

/**
 * Runs `fn`; answers what it gave (or threw), this process's CPU time, and how long it held its event loop:
 * `stretchMs`, the most CPU time spent between two turns of its timers (what one stretch of work cost, whatever
 * else this shared machine runs), and `stallMs`, the longest delay of the loop in wall time (perf_hooks: on a
 * loaded machine it counts the time the process waited for a CPU too).
 */
async function measured<T>(fn: () => Promise<T>) {
  const delay = monitorEventLoopDelay({ resolution: 5 });
  const cpu = process.cpuUsage();
  let last = cpu;
  let stretch = 0;
  const ticks = setInterval(() => {
    const spent = process.cpuUsage(last);
    last = process.cpuUsage();
    stretch = Math.max(stretch, (spent.user + spent.system) / 1000);
  }, 5);
  const started = performance.now();
  delay.enable();
  let outcome: { value?: T; error?: Error };
  try {
    outcome = { value: await fn() };
  } catch (err) {
    outcome = { error: err as Error };
  }
  // The stretch that ended with `fn` (its last message handled, its promise resolved) is counted by the next turn.
  await new Promise((r) => setTimeout(r, 20));
  delay.disable();
  clearInterval(ticks);
  const used = process.cpuUsage(cpu);
  return {
    ...outcome,
    stretchMs: Math.round(stretch),
    stallMs: Math.round(delay.max / 1e6),
    cpuMs: Math.round((used.user + used.system) / 1000),
    seconds: (performance.now() - started) / 1000,
  };
}

const call = (c: McpServerConnection, name: string, args: Record<string, unknown>, timeoutMs = 20_000, onProgress?: () => void) =>
  c.callTool(name, args, { signal: new AbortController().signal, timeoutMs, ...(onProgress ? { onProgress } : {}) });
const textOf = (r: Awaited<ReturnType<typeof call>>) => (r.content[0] as { text: string }).text;

describe("a call's own Streamable HTTP stream", () => {
  it('4,900 progress notifications before the answer: answered, the event loop let go between pieces of the stream', async () => {
    const web = connect('web', 'http');
    await web.listTools();
    let progress = 0;
    const answer = call(web, 'notify', { count: 4900, bytes: 10, kind: 'progress' }, 30_000, () => progress++);
    // This process busy elsewhere while the server sends them all (as it is when other sessions' work runs): they
    // wait in the socket, and are read as fast as it gives them (on a loaded machine the server is slower than
    // this process's reads, and they would come a few at a time).
    await waitFor(() => progress > 0, { what: 'the first notification', timeoutMs: 10_000, intervalMs: 1 });
    const busyUntil = Date.now() + 15_000;
    while (Date.now() < busyUntil && !(fs.existsSync(statsFile('web')) && statsOf('web').sent >= 4900))
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    const r = await measured(() => answer);
    console.log(
      `4,900 notifications on a call's stream: the event loop held at most ${r.stretchMs} ms of CPU (${r.stallMs} ms of wall time), ${r.cpuMs} ms of CPU, ${r.seconds.toFixed(1)} s`,
    );
    expect(r.error).toBeUndefined();
    expect(textOf(r.value!)).toBe('sent 4900');
    expect(progress).toBe(4900);
    // Before: what had come by each read (hundreds of messages) was parsed and handled in one stretch. Loaded here: 30 ms.
    expect(r.stretchMs).toBeLessThan(200);
  });
});

describe("a Streamable HTTP server's JSON answer", () => {
  it('a batch of 100,000 notifications and the answer (8.6 MB) is not read: the call is an error saying why', async () => {
    const raw = spawn(process.execPath, [HAND_WRITTEN], { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<string>((resolve) =>
        raw.stdout!.on('data', (b: Buffer) => /listening (\d+)/.exec(String(b)) && resolve(/listening (\d+)/.exec(String(b))![1])),
      );
      const batch = connect('batch', new URL(`http://127.0.0.1:${port}/mcp`));
      await batch.listTools();
      const r = await measured(() => call(batch, 'batch', {}));
      console.log(
        `a JSON batch of 100,000 notifications: the call ended in ${r.seconds.toFixed(1)} s, the event loop held at most ${r.stretchMs} ms of CPU (${r.stallMs} ms of wall time)`,
      );
      // Before: parsed, checked and handled whole, in one stretch, and the call answered 'batched'.
      expect(r.error?.message).toMatch(/the MCP server answered a JSON batch, where one message is the answer: not read/);
      expect(r.stretchMs).toBeLessThan(100);
    } finally {
      raw.kill();
    }
  });
});

describe("a Streamable HTTP server's own stream", () => {
  it('log messages without end are handled at most 100 a second: 5 s of a flood cost little CPU', async () => {
    const web = connect('webown', 'http');
    await web.listTools();
    const r = await measured(() => call(web, 'notify_forever', { kind: 'logging', bytes: 10, related: false }, 5000));
    console.log(
      `5 s of small log messages on the server's own stream: ${r.cpuMs} ms of CPU, the event loop held at most ${r.stretchMs} ms of CPU (${r.stallMs} ms of wall time)`,
    );
    expect(r.error?.message).toMatch(/timed out/i);
    // Before: read at 256 KiB/s, about 2,000 messages a second, each parsed and handled (about a third of a CPU: some
    // 1,700 ms of the 5 s). Loaded here: 140 ms.
    expect(r.cpuMs).toBeLessThan(800);
    expect(r.stretchMs).toBeLessThan(100);
  });
});

describe('a stdio server', () => {
  it('progress without end on a call: the call fails past 5,000 saying so, and the server is told it is cancelled', async () => {
    const stdio = connect('progress', 'stdio');
    let progress = 0;
    const r = await measured(() => call(stdio, 'notify_forever', { kind: 'progress', bytes: 10 }, 15_000, () => progress++));
    console.log(
      `progress without end over stdio: the call ended in ${r.seconds.toFixed(1)} s, ${r.cpuMs} ms of CPU, the event loop held at most ${r.stretchMs} ms of CPU (${r.stallMs} ms of wall time)`,
    );
    // Before: read and handled until the call timed out (15 s, a CPU's worth of it).
    expect(r.error?.message).toMatch(/the MCP server sent over 5000 messages or 10485760 bytes about the call besides its answer: the call was given up/);
    expect(r.seconds).toBeLessThan(10);
    // The last few before the cut find the call given up.
    expect(progress).toBeGreaterThan(4900);
    expect(progress).toBeLessThanOrEqual(5000);
    expect(r.stretchMs).toBeLessThan(100);
    await waitFor(() => statsOf('progress').cancelled === 1, { what: 'the server to see the cancellation' });
    expect(logs.join('\n')).toMatch(/MCP server "progress": the MCP server sent over 5000 messages/);
    // The server goes on serving.
    expect(textOf(await call(stdio, 'notify', { count: 3, kind: 'progress' }))).toBe('sent 3');
  });

  it('log messages without end are read at most 100 a second: the rest wait in its pipe', async () => {
    const stdio = connect('unasked', 'stdio');
    await stdio.listTools();
    const r = await measured(() => call(stdio, 'notify_forever', { kind: 'logging', bytes: 10, related: false }, 3000));
    // Read once the server has seen the cancellation (it notes it then; its file may not exist before its first note).
    await waitFor(() => statsOf('unasked').cancelled === 1, { what: 'the server to see the cancellation' });
    const { sent } = statsOf('unasked'); // noted every 100, and at the cancellation
    console.log(
      `3 s of small log messages over stdio: ${sent} written, ${r.cpuMs} ms of CPU, the event loop held at most ${r.stretchMs} ms of CPU (${r.stallMs} ms of wall time)`,
    );
    expect(r.error?.message).toMatch(/timed out/i);
    // 100 a second, and what the pipe and the lines read but not handled hold (64 KiB each, of ~95-byte lines);
    // before, 256 KiB a second of them (over 8,000).
    expect(sent).toBeLessThan(3 * 100 + 2 * 700 + 400);
    expect(r.stretchMs).toBeLessThan(100);
  });
});

describe("a server's tools/list", () => {
  it('one page of 100,000 tools (4.7 MB): the first 1,000 are read and offered, each checked in its turn', async () => {
    const many = connect('many', 'stdio', { FLOOD_TOOLS: '100000' });
    const r = await measured(() => many.listTools());
    console.log(
      `a tools/list page of 100,000 tools: ${r.value?.length} offered in ${r.seconds.toFixed(1)} s, ${r.cpuMs} ms of CPU, the event loop held at most ${r.stretchMs} ms of CPU (${r.stallMs} ms of wall time)`,
    );
    expect(r.error).toBeUndefined();
    expect(r.value!.map((t) => t.name)).toEqual(Array.from({ length: 1000 }, (_, i) => `t${i}`));
    expect(logs.join('\n')).toContain('MCP server "many": one page of its tools/list lists 100000 tools: only the first 1000 are read');
    // Before: the SDK's schema checked all 100,000 in the stretch that parsed the line. Now: the JSON.parse of 4.7 MB
    // (neither can avoid it), then 50 tools a turn: 160 ms at most on a loaded machine.
    expect(r.stretchMs).toBeLessThan(1000);
  });
});

describe("a server's requests", () => {
  it('pings on a call over Streamable HTTP, 8 at a time for 3 s: 10 a second are answered, the rest go unanswered (each answer is an HTTP request)', async () => {
    const pings = connect('pings', 'http');
    await pings.listTools();
    const r = await measured(() => call(pings, 'ask', { count: 100_000, parallel: 8, forMs: 3000, timeoutMs: 1000, method: 'ping' }));
    const [answered, asked] = (/answered (\d+) of (\d+)/.exec(textOf(r.value!)) ?? []).slice(1).map(Number);
    console.log(`pings on a call for 3 s: ${answered} of ${asked} answered in ${r.seconds.toFixed(1)} s, ${r.cpuMs} ms of CPU`);
    // Before: every one answered as fast as the server asked (an HTTP request each).
    expect(answered).toBeLessThanOrEqual(Math.ceil(r.seconds + 1) * 10);
    expect(logs.join('\n')).toContain('MCP server "pings" sends more requests than are answered (10 a second, 16 waiting): the rest go unanswered');
  });
});

describe("servers' tool schemas", () => {
  let files = 0;
  const server = (tools: unknown[]) => {
    const file = path.join(dir, `tools-${++files}.json`);
    fs.writeFileSync(file, JSON.stringify(tools));
    return { command: process.execPath, args: [FLOOD], env: { FLOOD_TOOLS_FILE: file } };
  };
  const scope = { tenant: 'default' };
  const ctx = { sessionId: 's', signal: new AbortController().signal, timeoutMs: 10_000 } as ToolContext;

  it("a schema's $id is its server's own: another server's tool of the same $id does not check its arguments", async () => {
    const catalog = new ToolCatalog(
      parseMcpConfig(
        JSON.stringify({
          mcpServers: {
            loose: server([{ name: 'anything', inputSchema: { $id: 'urn:forkline-test:args', type: 'object' } }]),
            strict: server([
              {
                name: 'write',
                inputSchema: {
                  $id: 'urn:forkline-test:args',
                  type: 'object',
                  properties: { path: { type: 'string' } },
                  required: ['path'],
                  additionalProperties: false,
                },
              },
            ]),
          },
        }),
      ),
      (msg) => logs.push(msg),
    );
    try {
      // The loose server's list is made first: before, its schema was the one Ajv kept under that $id.
      expect(await (await catalog.find('loose__anything', scope))!.run({ evil: true }, ctx)).toBe('called anything');
      const write = (await catalog.find('strict__write', scope))!;
      await expect(write.run({ evil: true }, ctx)).rejects.toThrow(/invalid arguments for strict__write: .*path/);
      expect(await write.run({ path: 'a' }, ctx)).toBe('called write');
    } finally {
      await catalog.close();
    }
  });

  it("output schemas count toward a server's 256 KiB of tools: 10 tools of 60 KB output schemas are not all held and compiled", async () => {
    const outputSchema = (i: number) => ({ type: 'object', description: `${i} ${'d'.repeat(60_000)}` });
    const tools = Array.from({ length: 10 }, (_, i) => ({ name: `big_output_${i}`, inputSchema: { type: 'object' }, outputSchema: outputSchema(i) }));
    const catalog = new ToolCatalog(parseMcpConfig(JSON.stringify({ mcpServers: { outputs: server(tools) } })), (msg) => logs.push(msg));
    try {
      const offered = (await catalog.tools(scope)).filter((t) => t.server === 'outputs').map((t) => t.name);
      console.log(`10 tools of 60 KB output schemas: ${offered.length} offered`);
      // Before: all 10 (600 KB of schemas held and compiled; 1,000 such over pages: 64 MB, each compiled).
      expect(offered).toEqual([0, 1, 2, 3, 4].map((i) => `outputs__big_output_${i}`));
      expect(logs.join('\n')).toContain(
        'MCP server "outputs": tool "big_output_5" is not offered: the server lists more than 1000 tools or 262144 characters of them',
      );
    } finally {
      await catalog.close();
    }
  });

  it("a server's 1,000 tools are made (their schemas compiled) a few at a time", async () => {
    const schema = (i: number) => ({
      type: 'object',
      properties: { [`p${i}`]: { type: 'string', pattern: `^x${i}$`, format: 'email' }, n: { type: 'array', items: { type: 'integer', minimum: i } } },
      required: [`p${i}`],
    });
    const tools = Array.from({ length: 1000 }, (_, i) => ({ name: `t${i}`, inputSchema: schema(i) }));
    const catalog = new ToolCatalog(parseMcpConfig(JSON.stringify({ mcpServers: { many: server(tools) } })), (msg) => logs.push(msg));
    try {
      const r = await measured(() => catalog.tools(scope));
      console.log(`1,000 tools made: the event loop held at most ${r.stretchMs} ms of CPU (${r.stallMs} ms of wall time), ${r.cpuMs} ms of CPU`);
      expect(r.value!.filter((t) => t.server === 'many')).toHaveLength(1000);
      // Before: all 1,000 compiled in one stretch of 1.5 s (and again each time the list changed). Loaded here: 90 ms.
      expect(r.stretchMs).toBeLessThan(600);
    } finally {
      await catalog.close();
    }
  });
});
