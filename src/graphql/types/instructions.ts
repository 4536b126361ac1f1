// A session's instructions (its system prompt, session/instructions events):
// `Session.instructions` and `setSessionInstructions`. Mapping only: the
// model request sends them first (core/model-request.ts).
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { instructionsSchema } from '../../core/input-rules.ts';
import { logAsOf } from '../../store/log-as-of.ts';
import { SessionRef } from './session.ts';
import { dataOf } from '../../core/core-event.ts';
import { scopedReads } from '../scoped-reads.ts';

builder.objectFields('Session', (t) => ({
  instructions: t.string({
    nullable: true,
    description: "Its instructions as of the end of its log (its last session/instructions event, a fork's own or inherited); null when none. One index probe.",
    resolve: async (s, _a, ctx) => {
      const e = await scopedReads(ctx).log.lastOfType(logAsOf(s), 'session/instructions');
      const text = dataOf(e, 'session/instructions')?.text;
      return text ? text : null;
    },
  }),
}));

const setInstructionsArgs = z.object({ sessionId: sessionIdSchema, instructions: instructionsSchema });

const SetSessionInstructionsInput = builder.inputType('SetSessionInstructionsInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    instructions: t.string({ required: true, description: 'The new instructions; "" for none.' }),
  }),
});

builder.mutationFields((t) => ({
  setSessionInstructions: t.field({
    type: SessionRef,
    description:
      'Records a session/instructions event: every later model request (the next step of a running turn included) sends them first, ' +
      'and so does a fork cut after it.',
    args: { input: t.arg({ type: SetSessionInstructionsInput, required: true }) },
    resolve: (_root, { input }, ctx) => {
      const p = parseArgs(setInstructionsArgs, input);
      return ctx.services.controller.setSessionInstructions(ctx.scope, p.sessionId, p.instructions);
    },
  }),
}));
