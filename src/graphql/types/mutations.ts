import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { EventRef } from './event.ts';
import { ModelConfigInput, modelSchema } from './inputs.ts';
import type { ForkResult } from '../../store/session-store.ts';
import type { StoredEvent } from '../../store/session-log.ts';

const titleSchema = z.string().max(500).nullish();
export const idempotencyKeySchema = z.string().min(1).max(200).nullish();

/** The optional idempotency key every creating mutation takes. */
export const idempotencyKeyArg = (t: { arg: { string: (opts: { description: string }) => any } }) =>
  t.arg.string({
    description:
      'Makes the call safe to retry: a retry with the same key (per tenant, kept 24 h) and the same input returns the first result ' +
      'instead of doing it again; the same key with a different input is BAD_USER_INPUT.',
  });
const seqSchema = z.number().int().min(-1).max(2 ** 31 - 1);

const CreateSessionInput = builder.inputType('CreateSessionInput', {
  fields: (t) => ({
    title: t.string(),
    model: t.field({ type: ModelConfigInput }),
  }),
});

const ForkSessionInput = builder.inputType('ForkSessionInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    atSeq: t.int({ description: 'Exact event to fork at (inclusive). Omitted: through the last turn/end.' }),
    title: t.string(),
  }),
});

const BranchSessionInput = builder.inputType('BranchSessionInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    anchorSeq: t.int({ description: 'Branch through the first turn/end at or after this seq. Omitted or past the end: the last turn/end.' }),
    title: t.string(),
  }),
});

const ForkSessionPayload = builder
  .objectRef<{ sessionId: string; parentId: string; cutSeq: number; syntheticEvents: StoredEvent[] }>('ForkSessionPayload')
  .implement({
    fields: (t) => ({
      session: t.prismaField({
        type: 'Session',
        resolve: (query, p, _a, ctx) => ctx.prisma.session.findUniqueOrThrow({ ...query, where: { id: p.sessionId } }),
      }),
      parent: t.prismaField({
        type: 'Session',
        resolve: (query, p, _a, ctx) => ctx.prisma.session.findUniqueOrThrow({ ...query, where: { id: p.parentId } }),
      }),
      cutSeq: t.exposeInt('cutSeq', { description: 'Last parent seq the child inherits (-1: none).' }),
      syntheticEvents: t.field({
        type: [EventRef],
        description: 'The closers repair wrote for the open tail at the cut, in seq order.',
        resolve: (p) => p.syntheticEvents,
      }),
    }),
  });

export const DeleteSessionPayload = builder.objectRef<{ deletedSessionIds: string[] }>('DeleteSessionPayload').implement({
  fields: (t) => ({
    deletedSessionIds: t.exposeIDList('deletedSessionIds', { description: 'The session first, then its descendants.' }),
  }),
});

builder.mutationFields((t) => ({
  deleteSession: t.field({
    type: DeleteSessionPayload,
    description:
      'Deletes a session and its events. A session with children is refused (SESSION_HAS_CHILDREN: they share its events) ' +
      'unless withDescendants, which deletes the whole subtree. Running agents of deleted sessions stop; ' +
      'their subscriptions complete; sessionsDeleted reports the ids.',
    args: { id: t.arg.id({ required: true }), withDescendants: t.arg.boolean({ defaultValue: false }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, args, ctx) => {
      const p = parseArgs(z.object({ id: sessionIdSchema, withDescendants: z.boolean().nullish(), idempotencyKey: idempotencyKeySchema }), args);
      return { deletedSessionIds: await ctx.services.controller.deleteSession(ctx.scope, p.id, p.withDescendants ?? false, { key: p.idempotencyKey }) };
    },
  }),
  createSession: t.prismaField({
    type: 'Session',
    args: { input: t.arg({ type: CreateSessionInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (query, _root, { input, idempotencyKey }, ctx) => {
      const parsed = parseArgs(z.object({ title: titleSchema, model: modelSchema.nullish() }), input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      const s = await ctx.services.controller.createSession(ctx.scope, parsed, { key });
      return ctx.prisma.session.findUniqueOrThrow({ ...query, where: { id: s.id } });
    },
  }),
  forkSession: t.field({
    type: ForkSessionPayload,
    args: { input: t.arg({ type: ForkSessionInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const p = parseArgs(z.object({ sessionId: sessionIdSchema, atSeq: seqSchema.nullish(), title: titleSchema }), input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      const r = await ctx.services.controller.forkSession(ctx.scope, p.sessionId, p.atSeq ?? undefined, p.title, { key });
      return toPayload(r);
    },
  }),
  branchSession: t.field({
    type: ForkSessionPayload,
    args: { input: t.arg({ type: BranchSessionInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const p = parseArgs(z.object({ sessionId: sessionIdSchema, anchorSeq: seqSchema.nullish(), title: titleSchema }), input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      const r = await ctx.services.controller.branchSession(ctx.scope, p.sessionId, p.anchorSeq ?? undefined, p.title, { key });
      return toPayload(r);
    },
  }),
}));

function toPayload(r: ForkResult) {
  return { sessionId: r.session.id, parentId: r.parent.id, cutSeq: r.cutSeq, syntheticEvents: r.syntheticEvents };
}
