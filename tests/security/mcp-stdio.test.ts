// Stdio MCP servers' output at forkline's door (docs/operations.md "Threat
// model"): a server started over stdio writes what it likes on stdout and
// stderr. Real servers (the SDK's McpServer over StdioServerTransport, and a
// hand-written one for output no SDK writes) answer through a real service
// process, driven by the scripted model (`!call`), while its memory is sampled
// and /healthz timed (tests/helpers/under-watch.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { alive, postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { underWatch as watch } from '../helpers/under-watch.ts';
import { waitFor } from '../helpers/wait.ts';

const MiB = 1024 * 1024;
const RAW_SERVER = fileURLToPath(new URL('../fixtures/mcp/raw-stdio-server.mjs', import.meta.url));
const BIG_SERVER = fileURLToPath(new URL('../fixtures/mcp/big-stdio-server.mjs', import.meta.url));
const RAW = ['rawline', 'rawhuge', 'rawflood', 'rawerr'] as const;
let service: ServiceProcess;
let base: string;
let dir: string;
const statsDir = (name: string) => path.join(dir, name);

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-mcp-stdio-'));
  const servers: Record<string, unknown> = { big: { command: process.execPath, args: [BIG_SERVER], timeoutMs: 20_000 } };
  // One server per misbehaviour: a server stuck in its flood stays stuck.
  for (const name of RAW) {
    fs.mkdirSync(statsDir(name));
    servers[name] = { command: process.execPath, args: [RAW_SERVER], env: { RAW_STATS_DIR: statsDir(name) }, timeoutMs: 4000 };
  }
  const config = path.join(dir, 'mcp.json');
  fs.writeFileSync(config, JSON.stringify({ mcpServers: servers }));
  service = await startService({
    env: { DATABASE_URL: await createTestDatabase(), FORKLINE_API_TOKENS: undefined, FORKLINE_MCP_CONFIG: config },
  });
  base = service.url.replace(/\/graphql$/, '');
}, 120_000);

afterAll(async () => {
  await service?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function gql(query: string, variables?: Record<string, unknown>) {
  const r = await postGraphQL(service.url, query, variables);
  expect(r.body.errors, JSON.stringify(r.body.errors)).toBeUndefined();
  return r.body.data;
}

/** A new session's turn on `text`; the turn's events once it has ended. */
async function turn(text: string): Promise<any[]> {
  const id = (await gql('mutation { createSession(input: { title: "mcp" }) { id } }')).createSession.id as string;
  await gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
  await waitFor(async () => (await gql('query($id: ID!) { session(id: $id) { status turnCount } }', { id })).session.turnCount > 0, {
    what: 'the turn to start',
    timeoutMs: 60_000,
  });
  await waitFor(async () => (await gql('query($id: ID!) { session(id: $id) { status } }', { id })).session.status === 'IDLE', {
    what: 'the turn to end',
    timeoutMs: 60_000,
  });
  const page = await gql('query($id: ID!) { session(id: $id) { events(first: 200) { edges { node { type data } } } } }', { id });
  return page.session.events.edges.map((e: any) => e.node);
}

const resultOf = (events: any[]) => events.find((e) => e.type === 'tool/result')?.data as { status: string; content: string };
const noted = (server: string, name: string) => Number(fs.readFileSync(path.join(statsDir(server), name), 'utf8'));

async function underWatch<T>(what: string, fn: () => Promise<T>) {
  const { result, growthMB, slowestHealthzMs } = await watch(service.child.pid!, base, fn);
  console.log(`${what}: RSS +${Math.round(growthMB)} MB, slowest /healthz ${Math.round(slowestHealthzMs)} ms`);
  return { result, growthMB, slowestHealthzMs };
}

describe('an SDK server over stdio', () => {
  it('a 3 MB tools/list and a 9 MB answer are read in time linear in their size: /healthz keeps answering', async () => {
    const { result, slowestHealthzMs } = await underWatch('3 MB tools/list', () => gql('{ toolServers { name status toolCount } }'));
    expect(result.toolServers.find((s: any) => s.name === 'big')).toMatchObject({ status: 'READY' });
    const answered = await underWatch('9 MB answer', () => turn(`!call big__answer {"bytes": ${9 * MiB}}`));
    expect(resultOf(answered.result).status).toBe('ok');
    // Loaded here: 0.6-0.7 s. The SDK's buffer joined each chunk to all before it: 1.2 GB copied for 3 MB, ten times that
    // for 9 MB, in the loop (the count: tests/agent/mcp-stdio-lines.test.ts).
    expect(Math.max(slowestHealthzMs, answered.slowestHealthzMs)).toBeLessThan(5000);
  });

  it('an answer over 10 MiB stops the server: the call fails saying why, and the next call starts it again', async () => {
    const events = await turn(`!call big__answer {"bytes": ${12 * MiB}}`);
    expect(resultOf(events)).toMatchObject({ status: 'error' });
    expect(resultOf(events).content).toMatch(/the MCP server wrote a message over 10485760 bytes: it was stopped/);
    expect(resultOf(await turn('!call big__answer {"bytes": 5}'))).toMatchObject({ status: 'ok', content: 'aaaaa' });
  });

  it('an error result of 9 MB is an error the model reads cut to 100,000 characters, kept cut and marked truncated', async () => {
    const events = await turn(`!call big__fail {"bytes": ${9 * MiB}}`);
    expect(resultOf(events).status).toBe('error');
    expect(resultOf(events).content).toMatch(/^f{100000}\n\[cut: the result was 9,437,184 characters; the first 100,000 are shown\]$/);
    const kept = events.find((e) => e.type === 'plugin/mcp/result').data.result;
    expect(kept).toMatchObject({ isError: true, truncated: true });
    expect(JSON.stringify(kept).length).toBeLessThan(1_100_000);
  });
});

describe('a result of 250,000 small parts (8 MB)', () => {
  it('the model reads those kept and is told how many are left out; the kept result is bounded', async () => {
    const { result: events } = await underWatch('250,000 parts', () => turn('!call big__parts {"count": 250000}'));
    const result = resultOf(events);
    expect(result.status).toBe('ok');
    const kept = events.find((e) => e.type === 'plugin/mcp/result').data.result;
    expect(kept).toMatchObject({ isError: false, truncated: true });
    expect(JSON.stringify(kept).length).toBeLessThan(1_100_000);
    const shown = kept.content.length;
    console.log(`250,000 parts: ${shown} kept, the model reads ${result.content.length} characters`);
    // Before: the first parts alone, and nothing said the other 240,000 were missing.
    expect(result.content.split('\n').at(-1)).toBe(`[cut: ${(250_000 - shown).toLocaleString('en-US')} of its 250,000 parts are left out]`);
    expect(result.content.startsWith('0\n1\n2\n')).toBe(true);
  });
});

describe('a hand-written server over stdio', () => {
  it('a line that never ends is cut at 10 MiB: the server and what it started are killed, memory stays flat', async () => {
    const { result: events, growthMB, slowestHealthzMs } = await underWatch('endless line', () => turn('!call rawline__endless_line {}'));
    expect(resultOf(events)).toMatchObject({ status: 'error' });
    expect(resultOf(events).content).toMatch(/over 10485760 bytes: it was stopped/);
    await waitFor(async () => !alive(noted('rawline', 'pid')) && !alive(noted('rawline', 'helper')), { what: 'the server and its helper to be gone' });
    expect(noted('rawline', 'written')).toBeLessThan(64 * MiB);
    expect(growthMB).toBeLessThan(150);
    expect(slowestHealthzMs).toBeLessThan(2000);
    expect(service.output()).toMatch(/MCP server \\"rawline\\" wrote a message over 10485760 bytes/);
  });

  it('a single line of 100 MB is cut at 10 MiB, not read to its end', async () => {
    const { result: events, growthMB } = await underWatch('100 MB line', () => turn('!call rawhuge__huge_line {}'));
    expect(resultOf(events).content).toMatch(/over 10485760 bytes: it was stopped/);
    expect(noted('rawhuge', 'written')).toBeLessThan(64 * MiB);
    expect(growthMB).toBeLessThan(150);
  });

  it('notifications without end are read at a bounded rate: the call times out, the process stays responsive', async () => {
    const started = Date.now();
    const { result: events, slowestHealthzMs } = await underWatch('notification flood', () => turn('!call rawflood__flood {}'));
    expect(resultOf(events)).toMatchObject({ status: 'error' });
    expect(resultOf(events).content).toMatch(/timed out/i);
    const seconds = (Date.now() - started) / 1000;
    // 256 KiB a second, and what the pipe holds: not the hundreds of MB a second an unpaused read takes.
    expect(noted('rawflood', 'written')).toBeLessThan((seconds + 2) * 256 * 1024 + 2 * MiB);
    expect(slowestHealthzMs).toBeLessThan(2000);
  });

  it('a flood of stderr is read at a bounded rate and logged a few lines a minute; the call is answered', async () => {
    const { result: events, growthMB } = await underWatch('stderr flood', () => turn('!call rawerr__stderr_flood {}'));
    expect(resultOf(events)).toMatchObject({ status: 'ok', content: 'after the flood' });
    const lines = service
      .output()
      .split('\n')
      .filter((l) => l.includes('MCP server \\"rawerr\\": eee'));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(60);
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThan(3000);
    expect(growthMB).toBeLessThan(150);
  });
});
