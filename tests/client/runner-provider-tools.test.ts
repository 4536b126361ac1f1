// Provider-defined tools with @forkline/ai-sdk (docs/runners.md, "Provider
// tools"): the real @ai-sdk/anthropic model talking to a fake Anthropic
// Messages API (tests/helpers/provider-rules.ts: it refuses what Anthropic
// refuses), through the real server.
//
// - A tool the client runs (Anthropic's `bash`, given an `execute`): its call
//   is in the log before the tool starts (the tool reads the log),
//   its result is stored, and the provider is offered it under its own name;
//   with streamText and with generateText (a request that does not stream,
//   answered with Anthropic's one JSON message: anthropicMessage).
// - The same tool under another valid key (`shell`): @ai-sdk/anthropic sends
//   it as `bash` and hands back its calls as `bash`, which the SDK answered
//   "Model tried to call unavailable tool 'bash'" (the old code); under a name
//   providers refuse (`shell.bash`) the old code offered it under its wire
//   form, with the same end. The turn now fails before the model is called,
//   naming the rule: a provider tool goes by the provider's own name. Under
//   those names (bash, str_replace_based_edit_tool, memory, computer) they are
//   offered as they are.
// - A tool the provider runs itself (web search, code execution): the turn
//   fails before the model is called, naming each such tool: with ai 6's
//   packages (no mark: one given an `execute` too), and with ai 7's, which
//   mark each tool (`isProviderExecuted`: OpenAI's local shell is the runner's).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI as createOpenAI7 } from '@ai-sdk/openai-v4';
import type { ToolSet } from 'ai';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { answers, refusingProviders } from '../helpers/provider-rules.ts';

let app: TestApp;
let provider: Awaited<ReturnType<typeof refusingProviders>>;

beforeAll(async () => {
  app = await startTestApp();
  // A request with no tool result after its last user message calls `bash`; else the model answers "done".
  provider = await refusingProviders((_p, body) => {
    const last = body.messages.at(-1);
    const answered = Array.isArray(last.content) && last.content.some((p: { type: string }) => p.type === 'tool_result');
    return answered ? answers.anthropic.text('done') : answers.anthropic.call({ id: 'toolu_1', name: 'bash', arguments: '{"command":"ls /tmp"}' });
  });
});
afterAll(async () => {
  await provider.close();
  await app.close();
});

const anthropic = () => createAnthropic({ baseURL: `${provider.base}/anthropic/v1`, apiKey: 'sk' });

/** The session's log as the store holds it. */
const logOf = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: anyData(e) }));
/** The names of the calls its model messages hold, and of those answered. */
function callsIn(log: Array<{ type: string; data: any }>) {
  const named = (type: string) => log.filter((e) => e.type === type);
  return {
    stored: named('model/message').flatMap((e) => e.data.toolCalls.map((c: { name: string }) => c.name)) as string[],
    answered: named('tool/result').map((e) => e.data.name as string),
  };
}

let sessionNo = 0;
/** A session of a pool of its own with one message, served once by `run`; its log. */
async function serveOnce(run: (session: RunnerSession, id: string) => Promise<unknown>) {
  const pool = `provider-tools-${++sessionNo}`;
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'list /tmp' } });
  const runner = new ForklineRunner({ url: app.url, pool });
  try {
    await runner.serve(id, (s) => run(s, id).then(() => {}));
  } finally {
    await runner.close();
  }
  return logOf(id);
}

describe.each(['stream', 'generate'] as const)('a provider-defined tool the runner runs (Anthropic bash, %s)', (mode) => {
  {
    const key = 'bash';
    it('runs: its call stored before it starts, its result after', async () => {
      const before = provider.received.length;
      const seen: Array<ReturnType<typeof callsIn>> = [];
      const inputs: unknown[] = [];
      const log = await serveOnce((s, id) => {
        const tools = {
          [key]: anthropic().tools.bash_20250124({
            execute: async (input) => {
              inputs.push(input);
              seen.push(callsIn(await logOf(id)));
              return 'a.txt\nb.txt';
            },
          }),
        } as ToolSet;
        return runAiSdkTurns(s, { model: anthropic()('fake-model'), tools, mode });
      });
      expect(inputs).toEqual([{ command: 'ls /tmp' }]);
      expect(seen).toEqual([{ stored: [key], answered: [] }]);
      const requests = provider.received.slice(before);
      expect(requests.map((r) => r.refusal)).toEqual([undefined, undefined]);
      // generateText asks for one JSON message (the fake answers it as Anthropic does), streamText for events.
      expect(requests.map((r) => r.body.stream === true)).toEqual([mode === 'stream', mode === 'stream']);
      // The provider's own tool, by its own name, in both requests; the history's call and result under it.
      for (const r of requests) expect(r.body.tools).toEqual([expect.objectContaining({ name: 'bash', type: 'bash_20250124' })]);
      expect(requests[1].body.messages.at(-2).content).toEqual([expect.objectContaining({ type: 'tool_use', id: 'toolu_1', name: 'bash' })]);
      expect(requests[1].body.messages.at(-1).content).toEqual([expect.objectContaining({ type: 'tool_result', tool_use_id: 'toolu_1' })]);
      expect(log.find((e) => e.type === 'session/runner-tools')!.data.tools).toEqual([expect.objectContaining({ name: key })]);
      expect(log.find((e) => e.type === 'tool/result')!.data).toMatchObject({ name: key, status: 'ok', content: 'a.txt\nb.txt' });
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    });
  }
});

describe("a provider-defined tool under a name other than the provider's", () => {
  it('fails the turn before the model is called, naming the rule: under another valid key its calls (named `bash`) would run nothing', async () => {
    const before = provider.received.length;
    let ran = 0;
    const a = anthropic();
    const tools = {
      shell: a.tools.bash_20250124({ execute: async () => (ran++, 'ran') }),
      str_replace_editor: a.tools.textEditor_20250728({ execute: async () => (ran++, 'ran') }),
    } as ToolSet;
    const log = await serveOnce((s) => runAiSdkTurns(s, { model: a('fake-model'), tools }));
    expect(provider.received.length).toBe(before);
    expect(ran).toBe(0);
    expect(log.find((e) => e.type === 'plugin/agent/error')!.data.message).toBe(
      'a provider tool must go by the name the provider gives it (the provider names its calls by that name; under another they would run nothing): ' +
        'tool "shell" is the provider\'s "bash", tool "str_replace_editor" is the provider\'s "str_replace_based_edit_tool"',
    );
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });

  it("runs each under the provider's own name: the names the request offers them by", async () => {
    const before = provider.received.length;
    const a = anthropic();
    const tools = {
      bash: a.tools.bash_20250124({ execute: async () => 'a.txt' }),
      str_replace_based_edit_tool: a.tools.textEditor_20250728({ execute: async () => 'edited' }),
      memory: a.tools.memory_20250818({ execute: async () => 'kept' }),
      computer: a.tools.computer_20250124({ displayWidthPx: 800, displayHeightPx: 600, execute: async () => 'clicked' }),
    } as ToolSet;
    const log = await serveOnce((s) => runAiSdkTurns(s, { model: a('fake-model'), tools }));
    expect(provider.received[before].body.tools.map((t: { name: string }) => t.name)).toEqual(Object.keys(tools));
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('fails the turn before the model is called: under its wire form, its calls (named `bash` by the provider) would run nothing', async () => {
    const before = provider.received.length;
    const a = anthropic();
    const tools = { 'shell.bash': a.tools.bash_20250124({ execute: async () => 'ran' }) } as ToolSet;
    const log = await serveOnce((s) => runAiSdkTurns(s, { model: a('fake-model'), tools }));
    expect(provider.received.length).toBe(before);
    expect(log.find((e) => e.type === 'plugin/agent/error')!.data.message).toBe(
      'provider tool "shell.bash" would be sent under a wire form, and the provider answers its calls by its own name: ' +
        'give a provider tool the name the provider gives it (such as "bash")',
    );
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });
});

describe('a tool the provider runs itself', () => {
  it('fails the turn before the model is called, naming each such tool (and not the runner-run one)', async () => {
    const before = provider.received.length;
    let ran = 0;
    const a = anthropic();
    const tools = {
      bash: a.tools.bash_20250124({ execute: async () => (ran++, 'ran') }),
      web_search: a.tools.webSearch_20250305({}),
      // ai 6's provider packages let a provider-run tool take an `execute`: the provider still runs it.
      code: a.tools.codeExecution_20250825({ execute: async () => (ran++, 'ran') } as never),
    } as ToolSet;
    const log = await serveOnce((s) => runAiSdkTurns(s, { model: a('fake-model'), tools }));
    expect(provider.received.length).toBe(before);
    expect(ran).toBe(0);
    expect(log.find((e) => e.type === 'plugin/agent/error')!.data.message).toBe(
      'the provider runs tools "web_search", "code" itself, inside the model call, before their calls could be recorded: ' +
        '@forkline/ai-sdk offers the model only tools the runner runs',
    );
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });

  it("is told apart by ai 7's packages' own mark: OpenAI's web search refused, its local shell (with an execute) not named", async () => {
    const before = provider.received.length;
    const openai = createOpenAI7({ apiKey: 'sk', baseURL: `${provider.base}/openai/v1` });
    const tools = {
      local_shell: openai.tools.localShell({ execute: async () => ({ output: 'ran' }) }),
      web_search: openai.tools.webSearch({}),
    } as unknown as ToolSet;
    const log = await serveOnce((s) => runAiSdkTurns(s, { model: anthropic()('fake-model'), tools }));
    expect(provider.received.length).toBe(before);
    expect(log.find((e) => e.type === 'plugin/agent/error')!.data.message).toMatch(
      /^the provider runs tool "web_search" itself, inside the model call, before its call could be recorded/,
    );
  });
});
