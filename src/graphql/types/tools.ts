// The tool catalog (`tools`), a session's tool set (`Session.tools`, recorded
// as session/tools events) and `setSessionTools`. Mapping only: the catalog is
// agent/tool-catalog.ts, the rule that a set names real tools the controller's.
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { toolSetSchema } from './inputs.ts';
import { toolAllowed, TOOL_EFFECTS, type ToolEffect } from '../../core/tools.ts';
import type { ToolServerStatus } from '../../agent/tool-catalog.ts';
import type { ToolDefinition } from '../../core/chat.ts';
import { runnerToolInfo } from '../../core/runner-tools.ts';

/** A tool as a client sees it: forkline's (built in or MCP) or one an external runner declared. */
export type ToolInfo = ToolDefinition & { server?: string };
import { logAsOf } from '../../store/log-as-of.ts';
import { SessionRef } from './session.ts';
import { dataOf } from '../../core/core-event.ts';
import { scopedReads } from '../scoped-reads.ts';

export const ToolEffectEnum = builder.enumType('ToolEffect', {
  description: 'What running a tool may do to the world: the retry advice a fork or crash repair gives for a call it cut off.',
  values: Object.fromEntries(TOOL_EFFECTS.map((e) => [e.toUpperCase().replace('-', '_'), { value: e }])) as Record<string, { value: ToolEffect }>,
});

export const ToolInfoRef = builder.objectRef<ToolInfo>('ToolInfo').implement({
  description: "A tool the agent can offer its model: built in, from an MCP server (FORKLINE_MCP_CONFIG), or an external runner's own (declareRunnerTools).",
  fields: (t) => ({
    name: t.exposeString('name', { description: 'The name the model calls: built-ins by theirs, MCP tools as <server>__<tool>.' }),
    server: t.string({ nullable: true, description: 'The MCP server it comes from; null: built in.', resolve: (tool) => tool.server ?? null }),
    description: t.exposeString('description'),
    effect: t.field({ type: ToolEffectEnum, resolve: (tool) => tool.effect }),
    inputSchema: t.field({ type: 'JSON', description: 'JSON Schema of its arguments.', resolve: (tool) => tool.parameters }),
  }),
});

const ToolServerStatusEnum = builder.enumType('ToolServerStatus', {
  values: {
    READY: { description: 'It started and listed its tools.' },
    FAILED: { description: 'It did not start, or did not answer tools/list: `error` says why (it is tried again on the next use).' },
    NOT_STARTED: { description: 'Not asked yet.' },
  } as const,
});

const ToolServerRef = builder.objectRef<ToolServerStatus>('ToolServer').implement({
  description: 'An MCP server of FORKLINE_MCP_CONFIG your sessions may use, and how it fared.',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Its tools are offered as <name>__<tool>.' }),
    status: t.field({ type: ToolServerStatusEnum, resolve: (s) => s.status }),
    error: t.string({ nullable: true, description: 'Why it failed (the start or tools/list error); null otherwise.', resolve: (s) => s.error ?? null }),
    toolCount: t.exposeInt('toolCount'),
  }),
});

builder.queryFields((t) => ({
  toolServers: t.field({
    type: [ToolServerRef],
    description:
      'The MCP servers your sessions may use, each asked for its tools now: a server that fails to start is FAILED with its error, not silently absent from `tools`.',
    resolve: (_root, _args, ctx) => ctx.services.tools.serverStatuses(ctx.scope),
  }),
  tools: t.field({
    type: [ToolInfoRef],
    description: 'Every tool a session of yours may be offered (an MCP server that cannot be reached is left out).',
    resolve: (_root, _args, ctx) => ctx.services.tools.tools(ctx.scope),
  }),
}));

builder.objectFields('Session', (t) => ({
  tools: t.field({
    type: [ToolInfoRef],
    description:
      "The tools the session's agent may use as of the end of its log: forkline's, those of its last session/tools event " +
      '(none: the default set, built-ins and the MCP servers marked default); ' +
      'a session of a runner pool: the tools its runner declared (its last session/runner-tools event; none: empty).',
    resolve: async (s, _a, ctx) => {
      if (s.runner != null) {
        const declared = await scopedReads(ctx).log.lastOfType(logAsOf(s), 'session/runner-tools');
        return (dataOf(declared, 'session/runner-tools')?.tools ?? []).map(runnerToolInfo);
      }
      const set = await scopedReads(ctx).log.lastOfType(logAsOf(s), 'session/tools');
      const tools = await ctx.services.tools.tools(ctx.scope);
      return tools.filter((tool) => toolAllowed(tool.name, dataOf(set, 'session/tools')?.tools ?? ctx.services.tools.defaultToolSet(ctx.scope)));
    },
  }),
}));

const setToolsArgs = z.object({ sessionId: sessionIdSchema, tools: toolSetSchema });

const SetSessionToolsInput = builder.inputType('SetSessionToolsInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    tools: t.stringList({ required: true, description: 'Tool names, "<server>__*" or "*"; [] for none.' }),
  }),
});

builder.mutationFields((t) => ({
  setSessionTools: t.field({
    type: SessionRef,
    description:
      'Records a session/tools event: later steps offer only these tools (names, "<server>__*" or "*"; [] for none), ' + 'and so does a fork cut after it.',
    args: { input: t.arg({ type: SetSessionToolsInput, required: true }) },
    resolve: (_root, { input }, ctx) => {
      const p = parseArgs(setToolsArgs, input);
      return ctx.services.controller.setSessionTools(ctx.scope, p.sessionId, p.tools);
    },
  }),
}));
