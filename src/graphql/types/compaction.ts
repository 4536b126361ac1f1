// compactSession (docs/contract.md#graphql-names): the controller's manual compaction.
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { SessionRef } from './session.ts';
import { asSelected, sessionColumns } from '../session-columns.ts';
import type { CompactionResult } from '../../agent/compaction.ts';
import { MAX_COMPACTION_INSTRUCTIONS_CHARS } from '../../core/text-limits.ts';

const CompactSessionInput = builder.inputType('CompactSessionInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    throughSeq: t.int({ description: 'The last seq the summary covers. Omitted: the end of the last completed turn.' }),
    instructions: t.string({ description: 'What the summary should keep or focus on, passed to the model.' }),
  }),
});

const compactArgs = z.object({
  sessionId: sessionIdSchema,
  throughSeq: z.number().int().min(0).nullish(),
  instructions: z.string().max(MAX_COMPACTION_INSTRUCTIONS_CHARS).nullish(),
});

const CompactSessionPayload = builder.objectRef<{ sessionId: string } & CompactionResult>('CompactSessionPayload').implement({
  description: 'A compaction written: plugin/compaction/start, surface/replace (the summary), plugin/compaction/end.',
  fields: (t) => ({
    session: t.field({
      type: SessionRef,
      resolve: async (p, _a, ctx, info) => asSelected(await ctx.store.requireSession(p.sessionId, sessionColumns(info))),
    }),
    fromSeq: t.exposeInt('fromSeq', { description: 'First seq the summary replaces.' }),
    toSeq: t.exposeInt('toSeq', { description: 'Last seq the summary replaces.' }),
    summarySeq: t.exposeInt('summarySeq', { description: 'Seq of the surface/replace holding the summary.' }),
    tokensBefore: t.exposeInt('tokensBefore', {
      description: 'The history the summary replaces, in tokens as the context budget estimates them (about four characters a token).',
    }),
    tokensAfter: t.exposeInt('tokensAfter', { description: 'The summary as the model reads it, in tokens estimated the same way.' }),
  }),
});

builder.mutationFields((t) => ({
  compactSession: t.field({
    type: CompactSessionPayload,
    description:
      "Replaces the model-visible history through throughSeq by the session's model's summary (plugin/compaction/start, surface/replace, " +
      "plugin/compaction/end), under the session's lease between turns: a running turn is waited for. Returns once the summary is written.",
    args: { input: t.arg({ type: CompactSessionInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(compactArgs, input);
      const r = await ctx.services.controller.compactSession(ctx.scope, p.sessionId, { throughSeq: p.throughSeq, instructions: p.instructions });
      return { sessionId: p.sessionId, ...r };
    },
  }),
}));
