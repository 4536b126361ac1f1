// Tool approval (docs/contract.md#tool-approval): `Session.pendingApprovals`,
// `approveToolCall`, `denyToolCall` and `setSessionToolApproval`. Mapping
// only: the rules are the log's (core/log-state.ts `approval pairing`), the
// use cases the controller's.
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { approvalReasonSchema, idSchema } from '../../core/input-rules.ts';
import { awaitingApproval } from '../../core/tool-approval.ts';
import { logAsOf } from '../../store/log-as-of.ts';
import { SessionRef } from './session.ts';
import { toolSetSchema } from './inputs.ts';
import type { Context } from '../context.ts';
import { scopedReads } from '../scoped-reads.ts';

interface PendingApproval {
  callId: string;
  name: string;
  arguments: string;
  seq: number;
}

const PendingApprovalRef = builder.objectRef<PendingApproval>('PendingApproval').implement({
  description: 'A tool call that waits for a decision (approveToolCall or denyToolCall) before it runs.',
  fields: (t) => ({
    callId: t.exposeID('callId'),
    name: t.exposeString('name', { description: 'The tool it calls.' }),
    arguments: t.exposeString('arguments', { description: 'Its arguments exactly as the model produced them (JSON text).' }),
    seq: t.exposeInt('seq', { description: 'Seq of its tool/approval-request event.' }),
  }),
});

builder.objectFields('Session', (t) => ({
  pendingApprovals: t.field({
    type: [PendingApprovalRef],
    description: 'Tool calls awaiting approval, in call order (the session is WAITING while there is one). Reads the open turn only when the session waits.',
    resolve: async (s, _a, ctx) => {
      if (s.status !== 'WAITING') return [];
      const { open } = await scopedReads(ctx).log.openTailFolded(logAsOf(s), s.eventCount - 1);
      const approvals = open?.step?.approvals;
      return awaitingApproval(open).map((c) => ({ callId: c.id, name: c.name, arguments: c.arguments, seq: approvals!.get(c.id)!.seq }));
    },
  }),
}));

const ToolDecisionInput = builder.inputType('ToolDecisionInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    callId: t.id({ required: true, description: 'The call awaiting approval (PendingApproval.callId).' }),
    reason: t.string({ description: 'Why (recorded with the decision; a denial tells the model). Omitted: none.' }),
  }),
});

const decisionArgs = z.object({
  sessionId: sessionIdSchema,
  callId: idSchema,
  reason: approvalReasonSchema.nullish(),
});

/** The caller, as the decision records it (`by`): who its token says it is. */
const callerOf = (ctx: Context) => ctx.caller.who ?? ctx.scope.tenant;

const DECIDED =
  'Records a tool/approval event (`by`: the caller) and the turn goes on. A call that is not awaiting approval — never asked, or decided already — is BAD_USER_INPUT (rule `approval pairing`).';

builder.mutationFields((t) => ({
  approveToolCall: t.field({
    type: SessionRef,
    description: `Approves a call awaiting approval: it runs once. ${DECIDED}`,
    args: { input: t.arg({ type: ToolDecisionInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(decisionArgs, input);
      const decided = await ctx.services.controller.decideToolCall(ctx.scope, p.sessionId, {
        callId: p.callId,
        decision: 'approved',
        reason: p.reason ?? '',
        by: callerOf(ctx),
      });
      return decided.session;
    },
  }),
  denyToolCall: t.field({
    type: SessionRef,
    description: `Denies a call awaiting approval: it never runs, and the model reads that it was denied and why. ${DECIDED}`,
    args: { input: t.arg({ type: ToolDecisionInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(decisionArgs, input);
      const decided = await ctx.services.controller.decideToolCall(ctx.scope, p.sessionId, {
        callId: p.callId,
        decision: 'denied',
        reason: p.reason ?? '',
        by: callerOf(ctx),
      });
      return decided.session;
    },
  }),
}));

const SetSessionToolApprovalInput = builder.inputType('SetSessionToolApprovalInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    tools: t.stringList({ required: true, description: 'Names, "<server>__*" or "*"; [] for only those the operator\'s configuration marks.' }),
  }),
});

const setToolApprovalArgs = z.object({ sessionId: sessionIdSchema, tools: toolSetSchema });

builder.mutationFields((t) => ({
  setSessionToolApproval: t.field({
    type: SessionRef,
    description:
      "Records a session/tool-approval event: from the next call on, these tools' calls wait for approval (as well as those the configuration marks).",
    args: { input: t.arg({ type: SetSessionToolApprovalInput, required: true }) },
    resolve: (_root, { input }, ctx) => {
      const p = parseArgs(setToolApprovalArgs, input);
      return ctx.services.controller.setSessionToolApproval(ctx.scope, p.sessionId, p.tools);
    },
  }),
}));
