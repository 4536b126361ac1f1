// FORKLINE_APPROVAL_TOOLS (docs/agents.md "Tool approval"): built-in tools
// whose calls need approval in every session, without a session asking; an
// unknown name stops the start with a message that names it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { BUILTIN_TOOL_NAMES, ToolCatalog } from '../../src/agent/tool-catalog.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

describe('FORKLINE_APPROVAL_TOOLS', () => {
  it('lists built-ins by name, and refuses a name no built-in has', () => {
    expect(loadConfig({}).FORKLINE_APPROVAL_TOOLS).toEqual([]);
    expect(loadConfig({ FORKLINE_APPROVAL_TOOLS: ' write_file, shell ,' }).FORKLINE_APPROVAL_TOOLS).toEqual(['write_file', 'shell']);
    expect(() => loadConfig({ FORKLINE_APPROVAL_TOOLS: 'write_file,rm_rf' })).toThrow(
      /FORKLINE_APPROVAL_TOOLS: "rm_rf" is not a built-in tool \(built-ins: clock, .*shell/,
    );
    // An MCP server's tool is marked in its own config, not here.
    expect(() => loadConfig({ FORKLINE_APPROVAL_TOOLS: 'files__write_file' })).toThrow(/FORKLINE_APPROVAL_TOOLS: "files__write_file" is not a built-in tool/);
    expect(() => new ToolCatalog(undefined, () => {}, { approvalTools: ['nope'] })).toThrow(/FORKLINE_APPROVAL_TOOLS: "nope" is not a built-in tool/);
    expect(BUILTIN_TOOL_NAMES).toEqual(expect.arrayContaining(['note_write', 'write_file', 'edit_file', 'delete_file', 'shell']));
  });

  describe('in a running service', () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp({ approvalTools: ['note_write'] });
    });
    afterAll(() => app?.close());

    const session = (id: string) =>
      app.ok(`query($id: ID!) { session(id: $id) { status pendingApprovals { callId name arguments } events(first: 100) { edges { node { type data } } } } }`, {
        id,
      });

    it('asks before a listed built-in runs, in a session that asked for nothing; other built-ins run at once', async () => {
      const { createSession } = await app.ok(`mutation { createSession(input: { title: "operator approval" }) { id } }`);
      const id = createSession.id as string;
      await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, {
        i: { sessionId: id, text: '!call note_read {"key": "k"}\n!then\n!call note_write {"key": "k", "value": "v"}' },
      });
      await app.services.host.idle();
      const waiting = (await session(id)).session;
      expect(waiting.status).toBe('WAITING');
      expect(waiting.pendingApprovals).toEqual([{ callId: expect.any(String), name: 'note_write', arguments: '{"key": "k", "value": "v"}' }]);
      // note_read is not listed: it ran without asking.
      const types = waiting.events.edges.map((e: { node: { type: string } }) => e.node.type);
      expect(types.filter((t: string) => t === 'tool/approval-request')).toHaveLength(1);
      expect(types.filter((t: string) => t === 'tool/result')).toHaveLength(1);

      await app.ok(`mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { id } }`, {
        i: { sessionId: id, callId: waiting.pendingApprovals[0].callId },
      });
      await app.services.host.idle();
      const done = (await session(id)).session;
      expect(done.status).toBe('IDLE');
      const results = done.events.edges
        .filter((e: { node: { type: string } }) => e.node.type === 'tool/result')
        .map((e: { node: { data: unknown } }) => e.node.data);
      expect(results.at(-1)).toMatchObject({ name: 'note_write', status: 'ok' });
    });
  });
});
