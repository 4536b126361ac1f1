// Which provider-defined tools @forkline/ai-sdk lets the runner run
// (docs/runners.md#provider-tools), against every tool the installed provider
// packages define. ai 6's packages do not say which of their tools the client
// runs (ai 7's mark each one, `isProviderExecuted`), so the adapter keeps a
// list of ids: a newer package defining a tool this test has not classified
// fails here, before an app meets it (an unknown id is refused as
// provider-run: safe, but a tool the runner should run would be refused).
// Where ai 7's OpenAI package marks a tool, the mark and the classification
// must agree, save where the tool's arguments decide (OpenAI's tool search:
// `execution: 'client'`; its shell: a hosted container).
import { describe, expect, it } from 'vitest';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAI as createOpenAI7 } from '@ai-sdk/openai-v4';
import type { ToolSet } from 'ai';
import { providerToolRefusal } from '@forkline/ai-sdk';

/** Who runs each provider tool the packages define, built with an `execute` and no other arguments. */
const KNOWN: Record<string, 'runner' | 'provider'> = {
  'anthropic.advisor_20260301': 'provider',
  'anthropic.bash_20241022': 'runner',
  'anthropic.bash_20250124': 'runner',
  'anthropic.code_execution_20250522': 'provider',
  'anthropic.code_execution_20250825': 'provider',
  'anthropic.code_execution_20260120': 'provider',
  'anthropic.computer_20241022': 'runner',
  'anthropic.computer_20250124': 'runner',
  'anthropic.computer_20251124': 'runner',
  'anthropic.computer_toolset_20260801': 'runner',
  'anthropic.memory_20250818': 'runner',
  'anthropic.text_editor_20241022': 'runner',
  'anthropic.text_editor_20250124': 'runner',
  'anthropic.text_editor_20250429': 'runner',
  'anthropic.text_editor_20250728': 'runner',
  'anthropic.tool_search_bm25_20251119': 'provider',
  'anthropic.tool_search_regex_20251119': 'provider',
  'anthropic.web_fetch_20250910': 'provider',
  'anthropic.web_fetch_20260209': 'provider',
  'anthropic.web_search_20250305': 'provider',
  'anthropic.web_search_20260209': 'provider',
  'openai.apply_patch': 'runner',
  'openai.code_interpreter': 'provider',
  'openai.computer': 'runner',
  'openai.custom': 'runner',
  'openai.file_search': 'provider',
  'openai.image_generation': 'provider',
  'openai.local_shell': 'runner',
  'openai.mcp': 'provider',
  'openai.programmatic_tool_calling': 'provider',
  'openai.shell': 'runner',
  'openai.tool_search': 'provider',
  'openai.web_search': 'provider',
  'openai.web_search_preview': 'provider',
  'google.code_execution': 'provider',
  'google.enterprise_web_search': 'provider',
  'google.file_search': 'provider',
  'google.google_maps': 'provider',
  'google.google_search': 'provider',
  'google.url_context': 'provider',
  'google.vertex_rag_store': 'provider',
};

type ProviderTool = ToolSet[string] & { id: string; isProviderExecuted?: boolean };
type Factories = Record<string, (args: Record<string, unknown>) => ProviderTool>;

/** Every tool a package's `tools` defines, each built with an `execute` (and a name, for OpenAI's custom tool). */
const built = (tools: unknown, args: Record<string, unknown> = {}): ProviderTool[] =>
  Object.values(tools as Factories).map((factory) => factory({ execute: async () => 'ran', name: 'custom_tool', ...args }));

const ai6 = [
  ...built(createAnthropic({ apiKey: 'sk' }).tools),
  ...built(createOpenAI({ apiKey: 'sk' }).tools),
  ...built(createGoogleGenerativeAI({ apiKey: 'sk' }).tools),
];
const ai7 = built(createOpenAI7({ apiKey: 'sk' }).tools);

/** Who the adapter takes a tool to be run by: a turn offering it is refused as the provider's, or not. */
const classified = (t: ProviderTool) => (/^the provider runs /.test(providerToolRefusal({ x: t }) ?? '') ? 'provider' : 'runner');

describe('provider tools of the installed packages', () => {
  it('are each classified (a new id fails here: say who runs it, here and in the ai 6 list)', () => {
    const ids = [...ai6, ...ai7].map((t) => t.id);
    expect(ids.filter((id) => !(id in KNOWN))).toEqual([]);
  });

  it.each([
    ['ai 6', ai6],
    ['ai 7', ai7],
  ])("are refused or run as classified (%s's packages)", (_major, tools) => {
    expect(Object.fromEntries(tools.map((t) => [t.id, classified(t)]))).toEqual(Object.fromEntries(tools.map((t) => [t.id, KNOWN[t.id]])));
  });

  it("agree with ai 7's marks, save where the tool's arguments decide", () => {
    const marked = Object.fromEntries(ai7.map((t) => [t.id, t.isProviderExecuted ? 'provider' : 'runner']));
    // Tool search runs at OpenAI unless the app asks to run it: ai 7 marks it not provider-run either way.
    expect({ ...marked, 'openai.tool_search': 'provider' }).toEqual(Object.fromEntries(ai7.map((t) => [t.id, KNOWN[t.id]])));
  });

  it('run at the provider, or by the runner, as their arguments say', () => {
    for (const tools of [createOpenAI({ apiKey: 'sk' }).tools, createOpenAI7({ apiKey: 'sk' }).tools]) {
      const search = (execution?: string) => tools.toolSearch({ execute: async () => ({ tools: [] }), ...(execution ? { execution } : {}) } as never);
      expect([classified(search() as ProviderTool), classified(search('server') as ProviderTool), classified(search('client') as ProviderTool)]).toEqual([
        'provider',
        'provider',
        'runner',
      ]);
      const shell = (type: string) => tools.shell({ execute: async () => ({ output: [] }), environment: { type } } as never) as ProviderTool;
      expect([classified(shell('local')), classified(shell('container_auto'))]).toEqual(['runner', 'provider']);
    }
  });
});
