import { z } from 'zod';
import { builder } from '../builder.ts';
import type { GraphQLResolveInfo } from 'graphql';
import type { Context } from '../context.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { EventRef } from './event.ts';
import { ModelConfigInput, modelSchema, RESPONSE_SCHEMA_DOC, RESPONSE_SCHEMA_NAME_DOC, responseFormatFields, responseFormatOf } from './inputs.ts';
import { messageTextSchema, titleSchema } from '../../core/input-rules.ts';
import { idempotencyKeyArg, idempotencyKeySchema } from './mutations.ts';
import { usageOf, type StepSummary, type Usage } from '../../core/turn-summary.ts';
import type { PendingInput } from '../../core/log-state.ts';
import { dataOf } from '../../core/core-event.ts';
import { MAX_SEQ, type LogRef, type StoredEvent } from '../../store/session-log.ts';
import { eventText, requestText, textBudgetOf } from '../request-texts.ts';
import {
  allTurns,
  errorReport,
  firstStepsOf,
  inputAddOf,
  MAX_LISTED_STEPS,
  lastTurns,
  stepsOf,
  turnError,
  turnErrorCode,
  turnHolding,
  turnInput,
  turnOutput,
  turnTotalsOf,
  withInputs,
  type TurnRow,
} from '../../store/turn-reads.ts';
import { sessionTotals, type SessionTotals } from '../../store/session-totals.ts';
import { badInput } from '../../core/errors.ts';
import { logAsOf } from '../../store/log-as-of.ts';
import { SessionRef } from './session.ts';
import { asSelected, sessionColumns } from '../session-columns.ts';
import { fieldNames, perSelection } from '../selection.ts';
import { scopedReads } from '../scoped-reads.ts';

const TEXT_CUT_DOC =
  'A request reads at most FORKLINE_PAGE_BYTES characters of such texts in all (answers, waiting inputs, error reports; ' +
  'docs/operations.md "Memory and time"): past that a text is cut, and says so. The whole text is in its event (Session.events, Event.data).';

/** A waiting input and the log it waits in: its text is read apart (eventText), its length known. */
type SessionInput = PendingInput & { log: LogRef; textLength?: number | null };

const inputText = (p: SessionInput, ctx: Context, info: GraphQLResolveInfo) =>
  eventText(ctx, info, p, { log: p.log, seq: p.seq, key: 'text', length: p.textLength });

const PendingInputRef = builder.objectRef<SessionInput>('PendingInput').implement({
  description: 'A user input waiting in the durable inbox.',
  fields: (t) => ({
    inputId: t.exposeID('inputId'),
    text: t.string({
      description: `The input's text. ${TEXT_CUT_DOC}`,
      resolve: async (p, _a, ctx, info) => (await inputText(p, ctx, info)).text,
    }),
    textTruncated: t.boolean({
      description: '`text` is a prefix: the request had read its budget of texts (the whole text: the inbox/add event at `seq`).',
      resolve: async (p, _a, ctx, info) => (await inputText(p, ctx, info)).truncated,
    }),
    seq: t.exposeInt('seq', { description: 'Seq of its inbox/add event.' }),
    responseSchema: t.field({
      type: 'JSON',
      nullable: true,
      description: "The JSON Schema its answer must match (sendMessage's responseSchema), if it asked for one.",
      resolve: (p) => p.responseFormat?.schema ?? null,
    }),
  }),
});

const UsageRef = builder.objectRef<Usage>('Usage').implement({
  description: 'Tokens as the model provider reported them (the scripted model counts words).',
  fields: (t) => ({
    inputTokens: t.expose('inputTokens', { type: 'SafeInt' }),
    outputTokens: t.expose('outputTokens', { type: 'SafeInt' }),
    costUsd: t.exposeFloat('costUsd', {
      nullable: true,
      description: "US dollars by the host's price table when the answers were written (FORKLINE_MODELS_CONFIG); null when no answer's model had a price.",
    }),
  }),
});

const MAX_LAST_TURNS = 1000;

const SessionTotalsRef = builder.objectRef<SessionTotals>('SessionTotals').implement({
  description: "A session's totals over its whole log (Session.totals).",
  fields: (t) => ({
    turns: t.exposeInt('turns'),
    endedTurns: t.exposeInt('endedTurns', { description: 'Turns with a turn/end (the others: the one running now).' }),
    steps: t.exposeInt('steps', { description: 'Model answers (model/message events).' }),
    toolCalls: t.exposeInt('toolCalls'),
    inputTokens: t.expose('inputTokens', { type: 'SafeInt', description: 'As the providers reported them (answers without usage count 0).' }),
    outputTokens: t.expose('outputTokens', { type: 'SafeInt' }),
    costUsd: t.exposeFloat('costUsd', {
      nullable: true,
      description:
        "US dollars over the answers whose model had a price in the host's table when they were written (FORKLINE_MODELS_CONFIG); null when none had.",
    }),
    // SafeInt, as durationMs: turns waiting weeks for a decision add up past a 32-bit Int.
    turnMs: t.expose('turnMs', {
      type: 'SafeInt',
      description: 'Time in ended turns, each from its turn/start to its turn/end (a turn a fork closed: to the cut).',
    }),
  }),
});

/**
 * Milliseconds from one stored time to another: never negative (an imported log's times may run backwards), and a
 * SafeInt, not a 32-bit Int (a turn that waited 25 days for a decision is past 2^31 ms; so are a recording's far times).
 */
const durationMs = (from?: Date, to?: Date) => (from && to ? Math.max(0, to.getTime() - from.getTime()) : null);

const StepRef = builder.objectRef<StepSummary>('Step').implement({
  description: 'One model round trip of a turn and the tool calls it asked for.',
  fields: (t) => ({
    step: t.exposeInt('step'),
    startSeq: t.exposeInt('startSeq'),
    endSeq: t.exposeInt('endSeq', { nullable: true }),
    reason: t.exposeString('reason', { nullable: true, description: 'step/end reason; null while open.' }),
    durationMs: t.field({
      type: 'SafeInt',
      nullable: true,
      description: 'From its step/start to its step/end being stored (a step a fork closed: to the cut); null while open.',
      resolve: (s) => durationMs(s.startedAt, s.endedAt),
    }),
    toolCallCount: t.exposeInt('toolCallCount'),
    usage: t.field({ type: UsageRef, nullable: true, resolve: (s) => s.usage }),
  }),
});

/** Whether a list of turns asks for its inputs' texts (then read within a budget: withInputs). */
const asksForInput = perSelection((info) => info.fieldNodes.some((n) => fieldNames(n.selectionSet, info.fragments, new Set()).has('input')));

/** The turn's input's text and its error report's message: two texts of one object, each read once per request. */
const inputOf = (turn: TurnRow, ctx: Context, info: GraphQLResolveInfo) =>
  requestText(ctx, info, turn, 'input', (budget) => turnInput(scopedReads(ctx).log, turn, budget));
const errorOf = (turn: TurnRow, ctx: Context, info: GraphQLResolveInfo) =>
  requestText(ctx, info, turn, 'error', (budget) => turnError(scopedReads(ctx).log, turn, budget));

const TurnRef = builder.objectRef<TurnRow>('Turn').implement({
  fields: (t) => ({
    turn: t.exposeInt('turn'),
    inputId: t.exposeID('inputId'),
    input: t.string({
      nullable: true,
      description: `Text of the input the turn consumed. ${TEXT_CUT_DOC}`,
      resolve: async (turn, _a, ctx, info) => (await inputOf(turn, ctx, info))?.text ?? null,
    }),
    inputTruncated: t.boolean({
      description: '`input` is a prefix: the request had read its budget of texts (the whole input: its inbox/add event, at `inputSeq`).',
      resolve: async (turn, _a, ctx, info) => (await inputOf(turn, ctx, info))?.truncated ?? false,
    }),
    inputSeq: t.int({
      nullable: true,
      description: 'Seq of the inbox/add event that queued its input (the whole input is its `data.text`); one index probe, shared with `input`.',
      resolve: async (turn, _a, ctx) => (await inputAddOf(scopedReads(ctx).log, turn))?.seq ?? null,
    }),
    startSeq: t.exposeInt('startSeq'),
    endSeq: t.exposeInt('endSeq', { nullable: true }),
    reason: t.exposeString('reason', { nullable: true, description: 'turn/end reason; null while open.' }),
    startedAt: t.field({ type: 'DateTime', nullable: true, resolve: (turn) => turn.startedAt ?? null }),
    endedAt: t.field({ type: 'DateTime', nullable: true, resolve: (turn) => turn.endedAt ?? null }),
    durationMs: t.field({
      type: 'SafeInt',
      nullable: true,
      description: 'From its turn/start to its turn/end being stored (a turn a fork closed: to the cut); null while open.',
      resolve: (turn) => durationMs(turn.startedAt, turn.endedAt),
    }),
    steps: t.field({
      type: [StepRef],
      description:
        "The turn's steps, with durations and usage (reads the turn's events): of a turn of more than 3,333 steps, its first 3,333 only (`stepsTruncated`; `stepCount` counts them all).",
      args: {
        first: t.arg.int({
          description: `Only the first \`first\` steps (1–${MAX_LISTED_STEPS}): reads those steps' events, not the rest of the turn's.`,
        }),
      },
      resolve: (turn, { first }, ctx) => {
        if (first == null) return stepsOf(scopedReads(ctx).log, turn);
        if (!Number.isInteger(first) || first < 1 || first > MAX_LISTED_STEPS) throw badInput(`first must be 1–${MAX_LISTED_STEPS}`);
        return firstStepsOf(scopedReads(ctx).log, turn, first);
      },
    }),
    stepCount: t.int({
      description: "The turn's steps, however many (counted over the log's index, its events not read out).",
      resolve: async (turn, _a, ctx) => (await turnTotalsOf(scopedReads(ctx).log, turn)).steps,
    }),
    toolCallCount: t.int({
      description: 'The tool calls its steps asked for, however many (counted like `stepCount`, in the same statement).',
      resolve: async (turn, _a, ctx) => (await turnTotalsOf(scopedReads(ctx).log, turn)).toolCalls,
    }),
    stepsTruncated: t.boolean({
      description: "`steps` holds the turn's first steps only: it has more than 3,333 (`stepCount`, `toolCallCount` and `usage` are over all).",
      resolve: async (turn, _a, ctx) => {
        const log = scopedReads(ctx).log;
        const [steps, totals] = await Promise.all([stepsOf(log, turn), turnTotalsOf(log, turn)]);
        return steps.length < totals.steps;
      },
    }),
    usage: t.field({
      type: UsageRef,
      nullable: true,
      description:
        "Tokens and cost over all the turn's answers, however many steps it has (summed in the database like `stepCount`, in the same " +
        'statement: its steps are not read out); null when the provider reported none.',
      resolve: async (turn, _a, ctx) => (await turnTotalsOf(scopedReads(ctx).log, turn)).usage,
    }),
    error: t.string({
      nullable: true,
      description: `Why a failed turn failed: its agent's error report (plugin/agent/error); null for a turn without one. Two index probes. ${TEXT_CUT_DOC}`,
      resolve: async (turn, _a, ctx, info) => (await errorOf(turn, ctx, info))?.text ?? null,
    }),
    errorTruncated: t.boolean({
      description: '`error` is a prefix: the request had read its budget of texts (the whole report: the plugin/agent/error event at `errorSeq`).',
      resolve: async (turn, _a, ctx, info) => (await errorOf(turn, ctx, info))?.truncated ?? false,
    }),
    errorSeq: t.int({
      nullable: true,
      description:
        'Seq of the plugin/agent/error event a failed turn failed with (the whole report is its `data.message`); null without one. ' +
        'One index probe, shared with `error` and `errorCode`.',
      resolve: async (turn, _a, ctx) => (await errorReport(scopedReads(ctx).log, turn))?.seq ?? null,
    }),
    errorCode: t.string({
      nullable: true,
      description:
        'The kind of error a failed turn failed with, when its report names one: `OUTPUT_SCHEMA_MISMATCH` (its answer did not match its responseSchema).',
      resolve: (turn, _a, ctx) => turnErrorCode(scopedReads(ctx).log, turn),
    }),
    structuredOutput: t.field({
      type: 'JSON',
      nullable: true,
      description:
        'A completed turn whose input asked for a responseSchema: its final answer, parsed and validated against the schema (model/message `output`); null otherwise.',
      resolve: (turn, _a, ctx) => turnOutput(scopedReads(ctx).log, turn),
    }),
  }),
});

/** A model/message read without its text (its length known) and the log it was read through. */
type Answer = StoredEvent & { log: LogRef };

/** An Answer's model/message data (the field's resolver only ever returns model/message events). */
const answerOf = (e: Answer) => dataOf(e, 'model/message')!;

const answerText = (e: Answer, ctx: Context, info: GraphQLResolveInfo) =>
  eventText(ctx, info, e, { log: e.log, seq: e.seq, key: 'text', length: e.textLength });

const AnswerRef = builder.objectRef<Answer>('Answer').implement({
  description: "A model's complete answer for one step: a model/message event.",
  fields: (t) => ({
    seq: t.exposeInt('seq'),
    turn: t.int({ resolve: (e) => answerOf(e).turn }),
    step: t.int({ resolve: (e) => answerOf(e).step }),
    text: t.string({
      description: `The answer's words. ${TEXT_CUT_DOC}`,
      resolve: async (e, _a, ctx, info) => (await answerText(e, ctx, info)).text,
    }),
    textTruncated: t.boolean({
      description: '`text` is a prefix of the answer: the request had read its budget of texts (the whole answer: the event at `seq`).',
      resolve: async (e, _a, ctx, info) => (await answerText(e, ctx, info)).truncated,
    }),
    textLength: t.int({
      description:
        "The whole answer's length in characters (Unicode code points, as Postgres counts them and as `text` is cut: an emoji outside the Basic Multilingual Plane counts once here, twice in JavaScript's `text.length`), however much of it `text` holds. " +
        'Read with the answer: asked alone, it reads no text and takes nothing of the budget.',
      resolve: async (e, _a, ctx, info) => e.textLength ?? (await answerText(e, ctx, info)).length,
    }),
    toolCallCount: t.int({
      description: 'Tool calls the answer asked for (a step that only calls tools has empty text).',
      resolve: (e) => answerOf(e).toolCalls.length,
    }),
    usage: t.field({
      type: UsageRef,
      nullable: true,
      description: 'Tokens the provider reported for this answer (null when it reported none).',
      resolve: (e) => usageOf(answerOf(e)),
    }),
    inherited: t.exposeBoolean('inherited', { description: 'Part of the prefix a fork inherited: not written by this session.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.objectFields('Session', (t) => ({
  lastAnswer: t.field({
    type: AnswerRef,
    nullable: true,
    description:
      "The log's last model/message (one index probe, with its text's length; its `text`, one more, within the request's text budget): what a fan-out's children are compared by. An inherited one " +
      "(`inherited`) is the parent's: the session has not answered yet since the fork. Null when the log has none.",
    // Like every log read of a Session below: the log as of the row's eventCount (one snapshot, docs/contract.md#log),
    // through the row's own lineage (no lineage lookup per child of a page).
    // Without its words: Answer.text reads them within the request's budget.
    resolve: async (s, _a, ctx) => {
      const log = logAsOf(s);
      const [answer] = await scopedReads(ctx).log.ofTypes(log, ['model/message'], {
        fromSeq: 0,
        toSeq: MAX_SEQ,
        limit: 1,
        descending: true,
        withoutTexts: true,
      });
      return answer && { ...answer, log };
    },
  }),
  pendingInputs: t.field({
    type: [PendingInputRef],
    // Without their texts: PendingInput.text reads them within the request's budget.
    resolve: async (s, _a, ctx) => {
      const log = logAsOf(s);
      return (await scopedReads(ctx).log.pendingInputs(log, s.pendingInputCount, true)).map((p) => ({ ...p, log }));
    },
  }),
  turnAt: t.field({
    type: TurnRef,
    nullable: true,
    args: { seq: t.arg.int({ required: true }) },
    description:
      'The turn holding event `seq` (its turn/start through its turn/end), with timing, usage and steps; null when `seq` ' +
      "is outside every turn. A few index probes, whatever the log's length (the dashboard asks it per visible turn).",
    resolve: (s, { seq }, ctx) => (seq >= 0 && seq < s.eventCount ? turnHolding(scopedReads(ctx).log, s, seq) : null),
  }),
  lastTurn: t.field({
    type: TurnRef,
    nullable: true,
    description:
      "The log's last turn (running or ended: its reason says how), with timing and usage; null before the first turn. " +
      "A few index probes: how a fan-out's children show a failed variant as failed.",
    resolve: (s, _a, ctx) => (s.eventCount > 0 ? turnHolding(scopedReads(ctx).log, s, s.eventCount - 1, { orBefore: true }) : null),
  }),
  totals: t.field({
    type: SessionTotalsRef,
    description:
      'Turns, steps, tool calls, tokens and the time spent in turns over the whole log (inherited turns included): ' +
      'summed in the database over the turn brackets and answers, the log is not read out.',
    resolve: (s, _a, ctx) => sessionTotals(scopedReads(ctx).log, logAsOf(s)),
  }),
  turns: t.field({
    type: [TurnRef],
    description:
      "The session's turns, oldest first. A list that asks for `input` holds at most FORKLINE_PAGE_BYTES of their texts plus one " +
      '(an input can be megabytes): past it, only its newest turns whose inputs fit.',
    args: { last: t.arg.int({ description: `Only the last \`last\` turns (1–${MAX_LAST_TURNS}): reads those turns' brackets, not the log's.` }) },
    resolve: async (s, { last }, ctx, info) => {
      if (last != null && (!Number.isInteger(last) || last < 1 || last > MAX_LAST_TURNS)) throw badInput(`last must be 1–${MAX_LAST_TURNS}`);
      const turns = last == null ? await allTurns(scopedReads(ctx).log, s) : await lastTurns(scopedReads(ctx).log, s, last);
      return asksForInput(info) ? withInputs(scopedReads(ctx).log, turns, textBudgetOf(ctx, info)) : turns;
    },
  }),
}));

const SendMessageInput = builder.inputType('SendMessageInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    text: t.string({ required: true }),
    responseSchema: t.field({ type: 'JSON', description: RESPONSE_SCHEMA_DOC }),
    responseSchemaName: t.string({ description: RESPONSE_SCHEMA_NAME_DOC }),
  }),
});

const SendMessagePayload = builder.objectRef<{ sessionId: string; inputId: string; event: StoredEvent }>('SendMessagePayload').implement({
  fields: (t) => ({
    session: t.field({
      type: SessionRef,
      resolve: async (p, _a, ctx, info) => asSelected(await ctx.store.requireSession(p.sessionId, sessionColumns(info))),
    }),
    inputId: t.exposeID('inputId'),
    event: t.field({
      type: EventRef,
      description: 'The inbox/add event that queued the input.',
      resolve: (p) => p.event,
    }),
  }),
});

// Argument schemas are built once: zod compiles each object schema on its first
// parse, and a schema built per call was compiled per call (a visible share
// of a server's CPU in the turns bench).
const sendMessageArgs = z.object({ sessionId: sessionIdSchema, text: messageTextSchema, ...responseFormatFields });
const setModelArgs = z.object({ sessionId: sessionIdSchema, model: modelSchema });
const setTitleArgs = z.object({ sessionId: sessionIdSchema, title: titleSchema });

const SetSessionModelInput = builder.inputType('SetSessionModelInput', {
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    model: t.field({ type: ModelConfigInput, required: true }),
  }),
});

builder.mutationFields((t) => ({
  sendMessage: t.field({
    type: SendMessagePayload,
    description: "Queues a user input in the session's inbox; its agent answers it in a later turn.",
    args: { input: t.arg({ type: SendMessageInput, required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const p = parseArgs(sendMessageArgs, input);
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      const r = await ctx.services.controller.sendMessage(ctx.scope, p.sessionId, p.text, { key }, responseFormatOf(p));
      return r;
    },
  }),
  cancelTurn: t.field({
    type: SessionRef,
    description:
      'Ends the running turn with reason `cancelled`. A turn waiting for approval (WAITING) ends too: its waiting calls are denied (by the caller) and never run.',
    args: { sessionId: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx, info) => {
      const id = parseArgs(sessionIdSchema, args.sessionId);
      await ctx.services.controller.cancelTurn(ctx.scope, id, ctx.caller.who ?? ctx.scope.tenant);
      // Read again: the row as the cancel left it, not as the check before it saw it.
      return asSelected(await ctx.store.requireSession(id, sessionColumns(info)));
    },
  }),
  setSessionModel: t.field({
    type: SessionRef,
    description:
      'Records a session/model event: later turns use this model. Takes `input`; the plain `sessionId` and `model` arguments are the deprecated older shape.',
    args: {
      input: t.arg({ type: SetSessionModelInput }),
      sessionId: t.arg.id({ deprecationReason: 'Use input: { sessionId, model }.' }),
      model: t.arg({ type: ModelConfigInput, deprecationReason: 'Use input: { sessionId, model }.' }),
    },
    resolve: (_root, { input, sessionId, model }, ctx) => {
      if (input && (sessionId != null || model != null)) throw badInput('give input, or the deprecated sessionId and model, not both');
      const p = parseArgs(setModelArgs, input ?? { sessionId, model });
      return ctx.services.controller.setSessionModel(ctx.scope, p.sessionId, p.model);
    },
  }),
  setSessionTitle: t.field({
    type: SessionRef,
    description: 'Records a session/title event.',
    args: { sessionId: t.arg.id({ required: true }), title: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => {
      const p = parseArgs(setTitleArgs, args);
      return ctx.services.controller.setSessionTitle(ctx.scope, p.sessionId, p.title);
    },
  }),
}));
