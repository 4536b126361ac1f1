// External runners (docs/contract.md#agent-loop, docs/contract.md#graphql-names): mapping only, onto
// host/runner-protocol.ts. A runner loop: subscribe to runnableSessions(pool),
// claimSession, read Session.modelRequest, appendEvents (publishTurnUpdate for
// text deltas), renewLease while it works, releaseSession.
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { EventRef } from './event.ts';
import { SessionRef } from './session.ts';
import { ToolEffectEnum, ToolInfoRef } from './tools.ts';
import { TOOL_EFFECTS } from '../../core/tools.ts';
import { unstorableReason } from '../../core/storable.ts';
import { wireToolNamesOf } from '../../core/wire-names.ts';
import { boundedModelRequest } from '../model-requests.ts';
import { idSchema, runnerPoolSchema } from '../../core/input-rules.ts';
import { MAX_APPEND_BATCH } from '../../store/session-store.ts';
import { externalRunnerOf, leaseIsFree, MAX_RUNNER_LEASE_MS, MIN_RUNNER_LEASE_MS, type RunnerClaim, type RunnerLease } from '../../store/leases.ts';
import type { ModelRequest, OpenCall, RunnerAppend, RunnerCompaction } from '../../host/runner-protocol.ts';
import type { RunnerLeaseTaken } from '../../host/live/leases-taken.ts';

/** Sessions one claimSessions call may take. */
const MAX_CLAIMS = 100;

const LeaseRef = builder.objectRef<RunnerLease>('Lease').implement({
  description: "An external runner's hold on a session: its appends must carry the token; it ends at expiresAt unless renewed (renewLease).",
  fields: (t) => ({
    sessionId: t.exposeID('sessionId'),
    token: t.exposeInt('token', { description: 'The fencing token (leaseToken in appendEvents, renewLease, releaseSession, publishTurnUpdate).' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    cancelRequested: t.boolean({
      description:
        "renewLease: the session's running turn was asked to stop (cancelTurn) and is still open: end it `cancelled`. cancelTurn ends a runner's turn itself and takes the lease (its next write answers LEASE_LOST); this is a cancel kept on the row and not ended yet, which the renewal ends (docs/runners.md \"A user's cancel\"). False on a claim.",
      resolve: (l) => l.cancelRequested ?? false,
    }),
  }),
});

const RunnerCompactionRef = builder.objectRef<RunnerCompaction>('RunnerCompaction').implement({
  description:
    "A compaction the runner should write before its next model call, because the request is over the session's budget: its own model summarises " +
    '`messages`, then it appends plugin/compaction/start, surface/replace {fromSeq, toSeq: throughSeq, content: the summary} and plugin/compaction/end ' +
    '(docs/runners.md); the next request holds the summary instead of that history.',
  fields: (t) => ({
    reason: t.string({ resolve: (c) => c.reason }),
    fromSeq: t.int({ description: 'First seq the summary replaces (0: it covers every earlier summary too).', resolve: (c) => c.fromSeq }),
    throughSeq: t.int({ description: 'Last seq the summary replaces: the end of the last completed turn.', resolve: (c) => c.throughSeq }),
    estimatedTokens: t.int({ description: "The request's estimated tokens (about four characters each).", resolve: (c) => c.estimatedTokens }),
    thresholdTokens: t.int({ description: "The budget it is over: the session's context window × FORKLINE_COMPACT_AT.", resolve: (c) => c.thresholdTokens }),
    messages: t.field({
      type: 'JSON',
      description: 'The model-visible history through throughSeq (OpenAI chat format): what to summarise.',
      resolve: (c) => c.messages,
    }),
  }),
});

const OpenCallRef = builder.objectRef<OpenCall>('OpenCall').implement({
  description:
    'A call of the open step with no result yet, and where it stands with approval (docs/runners.md, Tool approval): a runner taking the step up ' +
    'runs an approved call (after plugin/agent/approved-call-start), answers a denied one as not run, and asks for one not asked yet that needs a decision.',
  fields: (t) => ({
    id: t.id({ resolve: (c) => c.id }),
    name: t.string({ resolve: (c) => c.name }),
    arguments: t.string({ description: 'Its arguments as the model wrote them (JSON text).', resolve: (c) => c.arguments }),
    approval: t.string({
      nullable: true,
      description: 'null: never asked; `pending`: it awaits a decision (the session is WAITING); `approved` or `denied`: decided, not yet answered.',
      resolve: (c) => c.approval?.state ?? null,
    }),
    reason: t.string({ nullable: true, description: 'The reason given with the decision ("" : none).', resolve: (c) => c.approval?.reason ?? null }),
  }),
});

const WireToolNameRef = builder.objectRef<{ name: string; wireName: string }>('WireToolName').implement({
  description: "A tool's name and the form a provider request sends it under (docs/runners.md#wire-names).",
  fields: (t) => ({
    name: t.exposeString('name', { description: 'The name as the log and `tools` hold it.' }),
    wireName: t.exposeString('wireName', { description: 'The name every provider takes, derived from it alone: send this, read it back from the answer.' }),
  }),
});

const ModelRequestRef = builder.objectRef<ModelRequest>('ModelRequest').implement({
  description:
    "What the session's next model call would be sent, built as forkline's own agent builds it (docs/contract.md#continuing-a-child): inside an open turn, its next step's; " +
    "otherwise the next turn's, taking the first pending input.",
  fields: (t) => ({
    messages: t.field({
      type: 'JSON',
      description:
        'The conversation in OpenAI chat format (user, assistant with tool_calls, tool; synthetic results with their wording; compaction summaries as system messages).',
      resolve: (r) => r.messages,
    }),
    tools: t.field({
      type: [ToolInfoRef],
      description:
        "The tools the model may call. A session of a runner pool: the tools its runner declared (declareRunnerTools; none yet: empty), never forkline's catalog, " +
        "which a runner cannot run. A session forkline runs: the tools of its set from forkline's catalog (Session.tools).",
      resolve: (r) => r.tools,
    }),
    wireToolNames: t.field({
      type: [WireToolNameRef],
      description:
        "The names of `tools` and of `messages`' calls that providers refuse as they are (OpenAI, Anthropic, Gemini: `^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`), " +
        "each with the form forkline's own agent sends it under: offer a tool and show a call under that form, and record the answer's calls under " +
        'the names they stand for (docs/runners.md#wire-names). A name not listed is sent as it is.',
      resolve: (r) => wireToolNamesOf(r.messages, r.tools),
    }),
    turn: t.int({ nullable: true, description: 'The turn the call is in: the open one, or the next one (null: nothing to run).', resolve: (r) => r.turn }),
    step: t.int({ nullable: true, description: 'The step number the call gets (null: nothing to run).', resolve: (r) => r.step }),
    inputId: t.id({
      nullable: true,
      description: 'Outside an open turn: the input the next turn takes (write inbox/remove {taken} and turn/start with it).',
      resolve: (r) => r.inputId,
    }),
    eventCount: t.int({
      description: "The log's length the request was built from: the expectedEventCount of the batch that continues it.",
      resolve: (r) => r.eventCount,
    }),
    inTurn: t.boolean({ description: 'Whether a turn is open (the call continues it).', resolve: (r) => r.inTurn }),
    stepOpen: t.boolean({
      description:
        'Whether `step` is already started (its step/start is in the log: written by a claim with startTurn, or by the batch this request came with): ' +
        "the step's model/message comes next, not another step/start.",
      resolve: (r) => r.stepOpen,
    }),
    responseSchema: t.field({
      type: 'JSON',
      nullable: true,
      description:
        "The JSON Schema the turn's input asks the final answer to match (structured output; null: none): ask the model for it, " +
        'and store the parsed answer as the final model/message `output` (docs/runners.md).',
      resolve: (r) => r.responseFormat?.schema ?? null,
    }),
    responseSchemaName: t.string({
      nullable: true,
      description: 'The name the schema is sent under, if the input gave one.',
      resolve: (r) => r.responseFormat?.name ?? null,
    }),
    model: t.field({
      type: 'JSON',
      nullable: true,
      description: "The session's model configuration (its last session/model), if any.",
      resolve: (r) => r.model,
    }),
    openCalls: t.field({
      type: [OpenCallRef],
      description:
        "Inside an open step whose model message is stored: its calls with no result yet, in call order (a step waiting for, or just given, a person's " +
        'decision). A runner settles them before its next model call. Empty otherwise.',
      resolve: (r) => r.openCalls,
    }),
    approvalRequired: t.stringList({
      description:
        "The tools whose calls wait for a person's decision by the session's choice (CreateSessionInput.approvalRequired, setSessionToolApproval): names, " +
        '"<server>__*" or "*". A runner asks for a decision on such a call before it runs it, as for its own tools that need one (docs/runners.md).',
      resolve: (r) => r.approvalRequired,
    }),
    compaction: t.field({
      type: RunnerCompactionRef,
      nullable: true,
      description: "Set when this request is over the session's budget: the compaction to write before sending it (null: none needed).",
      resolve: (r) => r.compaction,
    }),
  }),
});

const ClaimSessionPayload = builder.objectRef<RunnerClaim>('ClaimSessionPayload').implement({
  fields: (t) => ({
    session: t.field({ type: SessionRef, description: 'The session as the claim left it (its modelRequest is what to run first).', resolve: (p) => p.session }),
    lease: t.field({ type: LeaseRef, resolve: (p) => p.lease }),
  }),
});

const AppendEventsPayload = builder.objectRef<RunnerAppend & { sessionId: string }>('AppendEventsPayload').implement({
  fields: (t) => ({
    session: t.field({ type: SessionRef, resolve: (p, _a, ctx) => ctx.store.requireSession(p.sessionId) }),
    events: t.field({ type: [EventRef], resolve: (p) => p.events }),
    eventCount: t.int({ description: "The log's length after the batch: the next batch's expectedEventCount.", resolve: (p) => p.eventCount }),
    released: t.boolean({
      description: 'Whether the batch gave the lease back (release: true, and the session has nothing left to run).',
      resolve: (p) => p.released,
    }),
    modelRequest: t.field({
      type: ModelRequestRef,
      nullable: true,
      description:
        "What the session's next model call would be sent after the batch (Session.modelRequest: after a turn's end, the next pending input's turn); " +
        'null once the lease was given back.',
      resolve: (p, _a, ctx, info) =>
        p.released
          ? null
          : boundedModelRequest(ctx, info, `${p.sessionId}@end`, () =>
              ctx.services.runners.modelRequest(ctx.scope, { id: p.sessionId, runner: 'runner' /* appended under a runner's lease */ }),
            ),
    }),
  }),
});

const LEASE_MS = `How long the lease lasts from now, in ms (${MIN_RUNNER_LEASE_MS}..${MAX_RUNNER_LEASE_MS}; default 30000).`;

const START_TURN =
  "Write the runner's first batch with the claim: when the session's request starts a new turn and needs no compaction first, the claim appends " +
  "inbox/remove {taken}, turn/start and step/start {step: 1} under the new lease (checked like any append), and modelRequest is that step's (stepOpen: true): " +
  "the runner's first append is the model's message. Otherwise nothing is written (stepOpen: false).";

const ClaimSessionInput = builder.inputType('ClaimSessionInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    runnerId: t.string({ required: true, description: 'Who claims (shown as the holder: Session.runnerHolder).' }),
    leaseMs: t.int({ description: LEASE_MS }),
    startTurn: t.boolean({ description: START_TURN }),
  }),
});

const ClaimSessionsInput = builder.inputType('ClaimSessionsInput', {
  fields: (t) => ({
    pool: t.string({ required: true }),
    runnerId: t.string({ required: true, description: 'Who claims (shown as the holder: Session.runnerHolder).' }),
    max: t.int({ required: true, description: `How many sessions the runner has room for (1..${MAX_CLAIMS}).` }),
    leaseMs: t.int({ description: LEASE_MS }),
    startTurn: t.boolean({ description: START_TURN }),
  }),
});

const LeaseInput = builder.inputType('LeaseInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    leaseToken: t.int({ required: true }),
    leaseMs: t.int({ description: `renewLease: ${LEASE_MS}` }),
  }),
});

const RunnerEventInput = builder.inputType('RunnerEventInput', {
  fields: (t) => ({
    type: t.string({
      required: true,
      description: 'A core event type (turn/start, step/start, model/message, tool/result, step/end, turn/end, inbox/remove, …) or plugin/<name>/….',
    }),
    data: t.field({ type: 'JSON', required: true }),
  }),
});

const AppendEventsInput = builder.inputType('AppendEventsInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    leaseToken: t.int({ required: true }),
    expectedEventCount: t.int({
      required: true,
      description: "The log's length the batch continues (Session.eventCount); otherwise SESSION_BUSY and nothing is written.",
    }),
    events: t.field({ type: [RunnerEventInput], required: true }),
    release: t.boolean({
      description:
        'Give the lease back in the same write when the batch leaves the session with nothing to run (no open turn, no pending input): see `released`.',
    }),
  }),
});

const RunnerToolInput = builder.inputType('RunnerToolInput', {
  fields: (t) => ({
    name: t.string({ required: true, description: 'The name the model calls it by (model/message toolCalls[].name).' }),
    description: t.string(),
    inputSchema: t.field({ type: 'JSON', description: 'JSON Schema of its arguments object.' }),
    effect: t.field({
      type: ToolEffectEnum,
      required: true,
      description: 'What running it may do to the world: the advice a fork or crash repair gives for a call it cut off.',
    }),
  }),
});

const DeclareRunnerToolsInput = builder.inputType('DeclareRunnerToolsInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    leaseToken: t.int({ required: true }),
    tools: t.field({ type: [RunnerToolInput], required: true, description: 'Every tool the runner runs for this session ([] for none).' }),
  }),
});

const PublishTurnUpdateInput = builder.inputType('PublishTurnUpdateInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    leaseToken: t.int({ required: true }),
    turn: t.int({ required: true }),
    step: t.int({ required: true }),
    answer: t.int({
      required: false,
      description:
        "Which answer of the step the text is of: 1 (the default) for the step's first model/message, 2 for the next (a model called " +
        'again within the step), and so on. Stream an answer after storing the one before it; without it, later answers reach ' +
        'subscribers that read the log (afterSeq, /chat, /agui) whole when stored.',
    }),
    text: t.string({
      required: true,
      description: 'A piece of model text as it streams (sessionTurns TEXT_DELTA); not stored: the complete text goes in model/message.',
    }),
  }),
});

const token = z.number().int().min(0);
const leaseMs = z.number().int().min(MIN_RUNNER_LEASE_MS).max(MAX_RUNNER_LEASE_MS).nullish();
const startTurn = z.boolean().nullish();
const claimArgs = z.object({ sessionId: sessionIdSchema, runnerId: idSchema, leaseMs, startTurn });
const claimManyArgs = z.object({ pool: runnerPoolSchema, runnerId: idSchema, max: z.number().int().min(1).max(MAX_CLAIMS), leaseMs, startTurn });
const leaseArgs = z.object({ sessionId: sessionIdSchema, leaseToken: token, leaseMs });
const appendArgs = z.object({
  sessionId: sessionIdSchema,
  leaseToken: token,
  expectedEventCount: z.number().int().min(0),
  events: z
    .array(z.object({ type: z.string().min(1).max(200), data: z.unknown() }))
    .min(1)
    .max(MAX_APPEND_BATCH),
  release: z.boolean().nullish(),
});
const publishArgs = z.object({
  sessionId: sessionIdSchema,
  leaseToken: token,
  turn: z.number().int().min(1),
  step: z.number().int().min(1),
  answer: z.number().int().min(1).nullish(),
  text: z.string().max(200_000),
});
const poolArgs = z.object({ pool: runnerPoolSchema });
const runnerArgs = z.object({ runnerId: idSchema });
/** A declared tool's JSON Schema: its depth checked before zod walks it (z.json recurses: one thousands of levels deep overflowed the stack). */
const runnerToolSchemaArg = z
  .unknown()
  .optional()
  .transform((v, ctx) => {
    if (v == null) return undefined;
    const unstorable = unstorableReason(v);
    const parsed = unstorable ? undefined : z.record(z.string(), z.json()).safeParse(v);
    if (!parsed?.success) {
      ctx.addIssue({ code: 'custom', message: unstorable ?? 'a JSON Schema is a JSON object' });
      return z.NEVER;
    }
    return parsed.data;
  });
const declareArgs = z.object({
  sessionId: sessionIdSchema,
  leaseToken: token,
  tools: z
    .array(
      z.object({
        name: z.string().min(1).max(200),
        description: z
          .string()
          .max(10_000)
          .nullish()
          .transform((v) => v ?? undefined),
        inputSchema: runnerToolSchemaArg,
        effect: z.enum(TOOL_EFFECTS),
      }),
    )
    .max(500),
});

builder.objectFields('Session', (t) => ({
  runner: t.exposeString('runner', {
    nullable: true,
    description: "The external runner pool that runs it (null: forkline's own agent); forks, branches, edits and fan-outs keep it.",
  }),
  runnerHolder: t.string({
    nullable: true,
    description: 'The id of the external runner holding its lease now (null: none, or a session forkline runs).',
    resolve: (s) => (s.runner != null && !leaseIsFree(s) ? (externalRunnerOf(s.leaseOwner) ?? null) : null),
  }),
  modelRequest: t.field({
    type: ModelRequestRef,
    description: "What the session's next model call would be sent, exactly as forkline's own agent would build it (external runners read it).",
    resolve: (s, _a, ctx, info) =>
      boundedModelRequest(ctx, info, `${s.id}@${s.eventCount ?? 'end'}`, () => ctx.services.runners.modelRequest(ctx.scope, s, ctx.statements)),
  }),
}));

builder.mutationFields((t) => ({
  claimSession: t.field({
    type: ClaimSessionPayload,
    description:
      'Takes the lease of a session of an external runner pool (SESSION_BUSY while another runner holds it). An open turn its previous holder left (its lease expired) is closed first (cause interrupted).',
    args: { input: t.arg({ type: ClaimSessionInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(claimArgs, input);
      return ctx.services.runners.claim(ctx.scope, p.sessionId, p.runnerId, p.leaseMs ?? undefined, { startTurn: p.startTurn ?? false });
    },
  }),
  claimSessions: t.field({
    type: [ClaimSessionPayload],
    description:
      'Takes the leases of up to `max` sessions of the pool with work that nobody holds (oldest first; none: an empty list), as claimSession takes one: ' +
      'a runner woken by runnableSessions claims what it has room for in one call.',
    args: { input: t.arg({ type: ClaimSessionsInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(claimManyArgs, input);
      return ctx.services.runners.claimRunnable(ctx.scope, p.pool, p.runnerId, p.max, p.leaseMs ?? undefined, { startTurn: p.startTurn ?? false });
    },
  }),
  renewLease: t.field({
    type: LeaseRef,
    description: 'Extends the lease (LEASE_LOST when it is no longer held under this token).',
    args: { input: t.arg({ type: LeaseInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(leaseArgs, input);
      return ctx.services.runners.renew(ctx.scope, p.sessionId, p.leaseToken, p.leaseMs ?? undefined);
    },
  }),
  releaseSession: t.field({
    type: SessionRef,
    description: 'Gives the lease back (LEASE_LOST when it is no longer held under this token); work left is offered again on runnableSessions.',
    args: { input: t.arg({ type: LeaseInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(leaseArgs, input);
      await ctx.services.runners.release(ctx.scope, p.sessionId, p.leaseToken);
      return ctx.store.requireSession(p.sessionId);
    },
  }),
  appendEvents: t.field({
    type: AppendEventsPayload,
    description:
      "An external runner's batch of events, checked by the same rules as forkline's own runner's appends (BAD_USER_INPUT {rule, seq}), " +
      "fenced by the lease (LEASE_LOST) and conditional on the log's length (SESSION_BUSY): all of it is written, or none.",
    args: { input: t.arg({ type: AppendEventsInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(appendArgs, input);
      const written = await ctx.services.runners.append(ctx.scope, p.sessionId, p.leaseToken, p.expectedEventCount, p.events, { release: p.release ?? false });
      return { ...written, sessionId: p.sessionId };
    },
  }),
  declareRunnerTools: t.field({
    type: SessionRef,
    description:
      'The lease holder declares the tools it runs for the session, with their effects: recorded as a session/runner-tools event when the set differs from the one in force ' +
      '(nothing is written otherwise). ModelRequest.tools lists them, and each call of one is recorded with its effect (a call naming another effect is refused), ' +
      "so forks and crash repair word a cut-off call as they word forkline's own tools'. LEASE_LOST when the lease is not held under this token.",
    args: { input: t.arg({ type: DeclareRunnerToolsInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(declareArgs, input);
      const tools = p.tools.map(({ name, description, inputSchema, effect }) => ({
        name,
        effect,
        ...(description !== undefined ? { description } : {}),
        ...(inputSchema !== undefined ? { inputSchema } : {}),
      }));
      await ctx.services.runners.declareTools(ctx.scope, p.sessionId, p.leaseToken, tools);
      return ctx.store.requireSession(p.sessionId);
    },
  }),
  publishTurnUpdate: t.boolean({
    description: "A model text delta for sessionTurns subscribers (TEXT_DELTA), from the lease's holder; not stored.",
    args: { input: t.arg({ type: PublishTurnUpdateInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const p = parseArgs(publishArgs, input);
      await ctx.services.runners.publishDelta(ctx.scope, p.sessionId, p.leaseToken, p);
      return true;
    },
  }),
}));

const LeaseTakenRef = builder.objectRef<RunnerLeaseTaken>('LeaseTaken').implement({
  description: 'A lease of the runner\'s that the service took: its turn is ended and nothing more of it is stored (docs/runners.md "A user\'s cancel").',
  fields: (t) => ({
    sessionId: t.exposeID('sessionId'),
    leaseToken: t.int({ description: 'The token the lease was held under (a claim of the session since then holds another).', resolve: (l) => l.token }),
    reason: t.exposeString('reason', {
      description: "Why: `cancelled` (a user's cancelTurn ended the turn) or `time limit` (the step ran past FORKLINE_RUNNER_MAX_STEP_MS).",
    }),
  }),
});

builder.subscriptionFields((t) => ({
  runnerLeasesTaken: t.field({
    type: LeaseTakenRef,
    description:
      "Leases held by the runner `runnerId` (claimSession's) of the caller's tenant, as the service takes them from now on: the runner stops the " +
      'work of that lease at once (its tool is not left running) rather than at its next write or renewal, which answer LEASE_LOST all the same.',
    args: { runnerId: t.arg.string({ required: true }) },
    subscribe: (_root, args, ctx) => ctx.services.live.runnerLeasesTaken(ctx.scope, parseArgs(runnerArgs, args).runnerId),
    resolve: (taken) => taken,
  }),
  runnableSessions: t.field({
    type: SessionRef,
    description:
      'Sessions of the runner pool with pending input or an open turn that nobody holds: those waiting now, then as they come ' +
      '(a session may come again: claimSession decides).',
    args: { pool: t.arg.string({ required: true }) },
    subscribe: (_root, args, ctx) => ctx.services.runners.runnable(ctx.scope, parseArgs(poolArgs, args).pool),
    resolve: (session) => session,
  }),
}));
