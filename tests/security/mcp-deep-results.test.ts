// A tools/call answer whose structured content nests deeper than JSON.stringify can write (a hand-written stdio
// server: no SDK server would send it), through the MCP SDK's client and the agent: the answer is the call's result,
// its structured content left out of what is kept and read as the log leaves out what it cannot hold
// (core/storable.ts), never a "Maximum call stack size exceeded" error in place of what the server answered.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';

const RAW_SERVER = fileURLToPath(new URL('../fixtures/mcp/raw-stdio-server.mjs', import.meta.url));
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ mcp: parseMcpConfig(JSON.stringify({ mcpServers: { raw: { command: process.execPath, args: [RAW_SERVER] } } })) });
});
afterAll(async () => {
  await app?.close();
});

/** A session's turn calling `tool`: its tool result and the kept MCP result. */
async function called(tool: string) {
  const r = await app.ok('mutation { createSession(input: { title: "deep" }) { id } }');
  const id = r.createSession.id as string;
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text: `!call raw__${tool} {}` } });
  await app.services.host.idle();
  const log = await app.services.store.log.page(id, -1, 1000);
  const kept = log.find((e) => e.type === 'plugin/mcp/result');
  return {
    end: log.at(-1)!,
    result: anyData(log.find((e) => e.type === 'tool/result')!),
    kept: kept && anyData(kept).result,
  };
}

describe('structured content nested 100,000 deep', () => {
  it('beside text: the text is the result; the structured content is left out of what is kept, marked truncated', async () => {
    const { end, result, kept } = await called('deep');
    expect(result).toMatchObject({ status: 'ok', content: 'deep' });
    expect(kept).toEqual({ content: [{ type: 'text', text: 'deep' }], isError: false, truncated: true });
    expect(end).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('alone: the model reads that it could not be read; nothing else is kept', async () => {
    const { result, kept } = await called('deep_only');
    expect(result).toMatchObject({ status: 'ok', content: '[structured content nested too deeply to be read]' });
    expect(kept).toEqual({ content: [], isError: false, truncated: true });
  });
});
