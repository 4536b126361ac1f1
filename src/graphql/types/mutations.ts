import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { EventRef } from './event.ts';
import {
  ModelConfigInput,
  modelSchema,
  RESPONSE_SCHEMA_DOC,
  RESPONSE_SCHEMA_NAME_DOC,
  responseFormatFields,
  responseFormatOf,
  toolSetSchema,
} from './inputs.ts';
import { idSchema, instructionsSchema, messageTextSchema, runnerPoolSchema, titleSchema as title } from '../../core/input-rules.ts';
import { SessionRef } from './session.ts';
import { SessionDeletion } from './deletion.ts';
import { MAX_FORK_CHILDREN, type ForkResult, type SessionRow } from '../../store/session-store.ts';

const titleSchema = title.nullish();
export const idempotencyKeySchema = idSchema.nullish();

/** The optional idempotency key every creating mutation takes. */
export const idempotencyKeyArg = <Arg>(t: { arg: { string: (opts: { description: string }) => Arg } }) =>
  t.arg.string({
    description:
      'Makes the call safe to retry: a retry with the same key (per tenant, kept 24 h) and the same input returns the first result ' +
      'instead of doing it again; the same key with a different input is BAD_USER_INPUT.',
  });
const seqSchema = z
  .number()
  .int()
  .min(-1)
  .max(2 ** 31 - 1);
/** A fork's overrides. */
const overridesSchema = {
  title: titleSchema,
  model: modelSchema.nullish(),
  message: messageTextSchema.nullish(),
  instructions: instructionsSchema.nullish(),
  ...responseFormatFields,
};

/** A fork's overrides with its message's response schema as the controller takes it. */
function withResponseFormat<T extends { responseSchema?: unknown; responseSchemaName?: string | null }>({ responseSchema, responseSchemaName, ...rest }: T) {
  const responseFormat = responseFormatOf({ responseSchema, responseSchemaName });
  return { ...rest, ...(responseFormat ? { responseFormat } : {}) };
}

// Argument schemas are built once: zod compiles each object schema on its first parse.
const deleteSessionArgs = z.object({ id: sessionIdSchema, withDescendants: z.boolean().nullish(), idempotencyKey: idempotencyKeySchema });
const createSessionArgs = z.object({
  title: titleSchema,
  model: modelSchema.nullish(),
  tools: toolSetSchema.nullish(),
  runner: runnerPoolSchema.nullish(),
  instructions: instructionsSchema.nullish(),
  approvalRequired: toolSetSchema.nullish(),
});
const forkSessionArgs = z.object({ sessionId: sessionIdSchema, atSeq: seqSchema.nullish(), ...overridesSchema });
const branchSessionArgs = z.object({ sessionId: sessionIdSchema, anchorSeq: seqSchema.nullish(), ...overridesSchema });
const editMessageArgs = z.object({
  sessionId: sessionIdSchema,
  inputId: idSchema,
  text: messageTextSchema,
  title: titleSchema,
  model: modelSchema.nullish(),
  instructions: instructionsSchema.nullish(),
  ...responseFormatFields,
});
const fanOutArgs = z
  .object({
    sessionId: sessionIdSchema,
    atSeq: seqSchema.nullish(),
    anchorSeq: seqSchema.nullish(),
    variants: z.array(z.object(overridesSchema)).min(1).max(MAX_FORK_CHILDREN),
  })
  .refine((v) => v.atSeq == null || v.anchorSeq == null, { message: 'give atSeq or anchorSeq, not both', path: ['atSeq'] });

const CreateSessionInput = builder.inputType('CreateSessionInput', {
  fields: (t) => ({
    title: t.string(),
    model: t.field({ type: ModelConfigInput }),
    tools: t.stringList({ description: 'The tools its agent may use (a session/tools event): names, "<server>__*" or "*". Omitted: all.' }),
    runner: t.string({
      description:
        "The external runner pool that runs it (runnableSessions, claimSession, appendEvents); its forks, branches, edits and fan-outs keep it. Omitted: forkline's own agent.",
    }),
    instructions: t.string({
      description: 'Its instructions (system prompt; a session/instructions event): sent first in every model request. Omitted or empty: none.',
    }),
    approvalRequired: t.stringList({
      description:
        'Tools whose calls wait for a person\'s approval (a session/tool-approval event): names, "<server>__*" or "*". Omitted: only those the configuration marks.',
    }),
  }),
});

const MODEL_OVERRIDE = "The child's model (a session/model event in its seed). Omitted: the model in force at the cut.";
const MESSAGE_OVERRIDE = "Queued as the child's input in the fork's own transaction: its agent starts on it at once.";
const INSTRUCTIONS_OVERRIDE = "The child's instructions (a session/instructions event in its seed; empty: none). Omitted: those in force at the cut.";

const ForkSessionInput = builder.inputType('ForkSessionInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    atSeq: t.int({ description: 'Exact event to fork at (inclusive). Omitted: through the last turn/end.' }),
    title: t.string(),
    model: t.field({ type: ModelConfigInput, description: MODEL_OVERRIDE }),
    message: t.string({ description: MESSAGE_OVERRIDE }),
    instructions: t.string({ description: INSTRUCTIONS_OVERRIDE }),
    responseSchema: t.field({ type: 'JSON', description: RESPONSE_SCHEMA_DOC }),
    responseSchemaName: t.string({ description: RESPONSE_SCHEMA_NAME_DOC }),
  }),
});

const BranchSessionInput = builder.inputType('BranchSessionInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    anchorSeq: t.int({ description: 'Branch through the first turn/end at or after this seq. Omitted or past the end: the last turn/end.' }),
    title: t.string(),
    model: t.field({ type: ModelConfigInput, description: MODEL_OVERRIDE }),
    message: t.string({ description: MESSAGE_OVERRIDE }),
    instructions: t.string({ description: INSTRUCTIONS_OVERRIDE }),
    responseSchema: t.field({ type: 'JSON', description: RESPONSE_SCHEMA_DOC }),
    responseSchemaName: t.string({ description: RESPONSE_SCHEMA_NAME_DOC }),
  }),
});

const EditMessageInput = builder.inputType('EditMessageInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    inputId: t.id({ required: true, description: 'The input to edit (sendMessage.inputId, PendingInput.inputId, Turn.inputId).' }),
    text: t.string({ required: true, description: "The new text, queued as the child's input." }),
    model: t.field({ type: ModelConfigInput, description: MODEL_OVERRIDE }),
    title: t.string(),
    instructions: t.string({ description: INSTRUCTIONS_OVERRIDE }),
    responseSchema: t.field({ type: 'JSON', description: RESPONSE_SCHEMA_DOC }),
    responseSchemaName: t.string({ description: RESPONSE_SCHEMA_NAME_DOC }),
  }),
});

const FanOutVariantInput = builder.inputType('FanOutVariantInput', {
  fields: (t) => ({
    message: t.string({ description: MESSAGE_OVERRIDE }),
    model: t.field({ type: ModelConfigInput, description: MODEL_OVERRIDE }),
    title: t.string(),
    instructions: t.string({ description: INSTRUCTIONS_OVERRIDE }),
    responseSchema: t.field({ type: 'JSON', description: RESPONSE_SCHEMA_DOC }),
    responseSchemaName: t.string({ description: RESPONSE_SCHEMA_NAME_DOC }),
  }),
});

const FanOutInput = builder.inputType('FanOutInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    atSeq: t.int({ description: 'Exact event every child forks at (inclusive). Not with anchorSeq.' }),
    anchorSeq: t.int({ description: 'Branch every child through the first turn/end at or after this seq. Neither given: through the last turn/end.' }),
    variants: t.field({ type: [FanOutVariantInput], required: true, description: `One child per variant, ${MAX_FORK_CHILDREN} at most.` }),
  }),
});

const ForkSessionPayload = builder.objectRef<ForkResult>('ForkSessionPayload').implement({
  fields: (t) => ({
    // The rows the fork wrote and read (the parent as of its snapshot): no read of their own.
    session: t.field({ type: SessionRef, resolve: (p) => p.session }),
    parent: t.field({ type: SessionRef, resolve: (p) => p.parent }),
    cutSeq: t.exposeInt('cutSeq', { description: 'Last parent seq the child inherits (-1: none).' }),
    syntheticEvents: t.field({
      type: [EventRef],
      description: 'The closers repair wrote for the open tail at the cut, in seq order.',
      resolve: (p) => p.syntheticEvents,
    }),
    inputId: t.exposeID('inputId', { nullable: true, description: "The input the fork queued in the child (its message, or editMessage's text)." }),
  }),
});

const FanOutPayload = builder.objectRef<{ parent: SessionRow; cutSeq: number; children: SessionRow[]; forks: ForkResult[] }>('FanOutPayload').implement({
  fields: (t) => ({
    parent: t.field({ type: SessionRef, nullable: false, resolve: (p) => p.parent }),
    cutSeq: t.exposeInt('cutSeq', { description: 'Last parent seq every child inherits (-1: none).' }),
    children: t.field({
      type: [SessionRef],
      nullable: { list: false, items: false },
      description: "One child per variant, in the order given. `Session.siblings` and the parent's `children` list them later.",
      resolve: (p) => p.children,
    }),
    forks: t.field({
      type: [ForkSessionPayload],
      description: "Each child's fork, in the order given: its closers (syntheticEvents) and the input its message queued (inputId).",
      resolve: (p) => p.forks,
    }),
  }),
});

export const DeleteSessionPayload = builder.objectRef<{ deletedSessionIds: string[] }>('DeleteSessionPayload').implement({
  fields: (t) => ({
    deletedSessionIds: t.exposeIDList('deletedSessionIds', { description: 'The session first, then its descendants.' }),
    deletion: t.field({
      type: SessionDeletion,
      nullable: true,
      description: 'The progress of reclaiming what the deletion left (as Query.sessionDeletion of the first id).',
      resolve: async (p, _args, ctx) => (p.deletedSessionIds.length ? ((await ctx.store.deletion(p.deletedSessionIds[0])) ?? null) : null),
    }),
  }),
});

builder.mutationFields((t) => ({
  deleteSession: t.field({
    type: DeleteSessionPayload,
    description:
      'Deletes a session and its events. A session with children is refused (SESSION_HAS_CHILDREN: they share its events) ' +
      'unless withDescendants, which deletes the whole subtree. The sessions are gone from every read at once; their stored rows are ' +
      'reclaimed after, in bounded chunks (deletion: its progress). Running agents of deleted sessions stop; ' +
      'their subscriptions complete; sessionsDeleted reports the ids.',
    args: { id: t.arg.id({ required: true }), withDescendants: t.arg.boolean({ defaultValue: false }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, args, ctx) => {
      const p = parseArgs(deleteSessionArgs, args);
      return { deletedSessionIds: await ctx.services.controller.deleteSession(ctx.scope, p.id, p.withDescendants ?? false, { key: p.idempotencyKey }) };
    },
  }),
  createSession: t.field({
    type: SessionRef,
    args: { input: t.arg({ type: CreateSessionInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: (_root, { input, idempotencyKey }, ctx) => {
      const { runner, instructions, approvalRequired, ...rest } = parseArgs(createSessionArgs, input);
      // Absent, the input hashes as before the fields existed (idempotent retries of older clients still match).
      const parsed = {
        ...rest,
        ...(runner == null ? {} : { runner }),
        ...(instructions ? { instructions } : {}),
        ...(approvalRequired?.length ? { approvalRequired } : {}),
      };
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      return ctx.services.controller.createSession(ctx.scope, parsed, { key });
    },
  }),
  forkSession: t.field({
    type: ForkSessionPayload,
    args: { input: t.arg({ type: ForkSessionInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const { sessionId, atSeq, ...overrides } = parseArgs(forkSessionArgs, input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      const r = await ctx.services.controller.forkSession(ctx.scope, sessionId, atSeq ?? undefined, withResponseFormat(overrides), { key });
      return r;
    },
  }),
  branchSession: t.field({
    type: ForkSessionPayload,
    args: { input: t.arg({ type: BranchSessionInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const { sessionId, anchorSeq, ...overrides } = parseArgs(branchSessionArgs, input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      const r = await ctx.services.controller.branchSession(ctx.scope, sessionId, anchorSeq ?? undefined, withResponseFormat(overrides), { key });
      return r;
    },
  }),
  editMessage: t.field({
    type: ForkSessionPayload,
    description:
      'Edit and re-run: an exact fork right before the inbox/add of that input (what is open there is closed with cause `forked`), ' +
      "with the new text queued as the child's input. The original session is untouched. An unknown input is BAD_USER_INPUT.",
    args: { input: t.arg({ type: EditMessageInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const { sessionId, inputId, text, ...overrides } = parseArgs(editMessageArgs, input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      return ctx.services.controller.editMessage(ctx.scope, sessionId, inputId, text, withResponseFormat(overrides), { key });
    },
  }),
  fanOut: t.field({
    type: FanOutPayload,
    description:
      'One child per variant, all at one cut (atSeq: exact; anchorSeq: turn-level branch; neither: through the last turn/end) ' +
      "of one snapshot, in one transaction; each child's agent starts on its message at once.",
    args: { input: t.arg({ type: FanOutInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const p = parseArgs(fanOutArgs, input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      const at = p.atSeq != null ? { atSeq: p.atSeq } : { anchorSeq: p.anchorSeq ?? undefined };
      const r = await ctx.services.controller.fanOut(ctx.scope, p.sessionId, at, p.variants.map(withResponseFormat), { key });
      return {
        parent: r.parent,
        cutSeq: r.cutSeq,
        children: r.children.map((c) => c.session),
        forks: r.children.map((c) => ({ ...c, parent: r.parent, cutSeq: r.cutSeq })),
      };
    },
  }),
}));
