// Subscriptions (docs/contract.md#graphql-names). Resolvers only validate and map: ordering,
// catch-up and cross-process delivery live in host/live/live-events.ts.
import { z } from 'zod';
import { DEFAULT_PAGE_SIZE, builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import { EventRef } from './event.ts';
import { SessionRef } from './session.ts';
import { DeleteSessionPayload } from './mutations.ts';
import { scopedReads } from '../scoped-reads.ts';
import { answerOf, type TurnUpdate } from '../../agent/turn-updates.ts';
import { LISTENING } from '../../host/live/live-events.ts';
import type { SessionRow } from '../../store/session-store.ts';

const TurnUpdateKindEnum = builder.enumType('TurnUpdateKind', {
  values: {
    TURN_STARTED: {},
    STEP_STARTED: {},
    TEXT_DELTA: { description: 'A piece of the model text as it streams (the complete text is persisted as model/message).' },
    TOOL_RUNNING: {},
    TOOL_PROGRESS: { description: 'A running tool reported progress (MCP progress notifications): `progress`, `total`, `text`.' },
    TOOL_FINISHED: {},
    APPROVAL_REQUESTED: {
      description:
        'A call waits for approval (tool/approval-request; the session is WAITING): `callId`, `toolName`, `arguments`. Decide it with approveToolCall or denyToolCall.',
    },
    APPROVAL_DECIDED: { description: 'A waiting call was decided (tool/approval): `callId`, `toolName`, `arguments`, `decision`, `reason`, `by`.' },
    STEP_ENDED: {},
    TURN_ENDED: {},
  } as const,
});

const TurnUpdateRef = builder.objectRef<TurnUpdate>('TurnUpdate').implement({
  description: 'Live progress of a turn: status changes and model text deltas (not persisted as such).',
  fields: (t) => ({
    sessionId: t.exposeID('sessionId'),
    kind: t.field({ type: TurnUpdateKindEnum, resolve: (u) => u.kind }),
    seq: t.exposeInt('seq', {
      nullable: true,
      description: 'The stored event this update stands for (null for TEXT_DELTA, TOOL_RUNNING and TOOL_PROGRESS, which are not in the log).',
    }),
    turn: t.exposeInt('turn'),
    inputId: t.exposeID('inputId', { nullable: true, description: 'TURN_STARTED: the input the turn takes (the inputId sendMessage returned).' }),
    step: t.exposeInt('step', { nullable: true }),
    answer: t.int({
      nullable: true,
      description:
        'TEXT_DELTA: which answer of the step the text is of (1: its first; a model called again within the step answers again: 2, 3, …). ' +
        'Each answer streams after the results of the calls of the one before it.',
      resolve: (u) => (u.kind === 'TEXT_DELTA' ? answerOf(u) : null),
    }),
    text: t.exposeString('text', { nullable: true, description: "TEXT_DELTA: the streamed text; TOOL_PROGRESS: the tool's message." }),
    progress: t.exposeFloat('progress', { nullable: true, description: 'TOOL_PROGRESS: how far the tool is.' }),
    total: t.exposeFloat('total', { nullable: true, description: 'TOOL_PROGRESS: the total, when the tool knows it.' }),
    callId: t.exposeString('callId', { nullable: true }),
    toolName: t.exposeString('toolName', { nullable: true }),
    arguments: t.exposeString('arguments', {
      nullable: true,
      description:
        "APPROVAL_REQUESTED / APPROVAL_DECIDED: the call's arguments as the model wrote them (JSON text). Null on a live update too large " +
        'to travel between processes (subscribe with afterSeq, or read Session.pendingApprovals).',
    }),
    status: t.exposeString('status', { nullable: true, description: 'TOOL_FINISHED: the result status.' }),
    reason: t.exposeString('reason', { nullable: true, description: "STEP_ENDED / TURN_ENDED: the reason; APPROVAL_DECIDED: the decision's reason." }),
    decision: t.exposeString('decision', { nullable: true, description: 'APPROVAL_DECIDED: `approved` or `denied`.' }),
    by: t.exposeString('by', { nullable: true, description: 'APPROVAL_DECIDED: who decided (from their token).' }),
  }),
});

const SessionListChangeRef = builder.objectRef<SessionRow | typeof LISTENING>('SessionListChange').implement({
  description: "sessionListChanges' results: first one that says the subscription listens, then the sessions as they change.",
  fields: (t) => ({
    listening: t.boolean({
      description: 'True on the first result only, sent once the subscription listens: a client that read before subscribing reads again then.',
      resolve: (c) => c === LISTENING,
    }),
    session: t.field({
      type: SessionRef,
      nullable: true,
      description: 'The session created, forked, imported or appended to (null on the first result).',
      resolve: (c) => (c === LISTENING ? null : c),
    }),
  }),
});

builder.subscriptionType({});

// Built once (zod compiles an object schema on its first parse).
const sessionEventsArgs = z.object({ sessionId: sessionIdSchema, afterSeq: z.number().int().min(-1).nullish() });
const sessionTurnsArgs = z.object({ sessionId: sessionIdSchema, afterSeq: z.number().int().min(-1).nullish() });

/**
 * Most sessions one sessionsTurns subscription follows: a page of children (the fan-out view shows 50). The
 * operation's cost counts each (query-cost.ts), and each is a relay subscriber and, with afterSeq, a replay of its log.
 */
export const MAX_FOLLOWED_SESSIONS = DEFAULT_PAGE_SIZE;

const SessionTurnsFromInput = builder.inputType('SessionTurnsFromInput', {
  description: 'A session sessionsTurns follows, and the seq to replay its turn updates after (as sessionTurns).',
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    afterSeq: t.int({ description: 'Replay the turn updates of events after this seq first (-1: from the start; omitted: live ones only).' }),
  }),
});

const sessionsChangedArgs = z.object({ startWith: z.array(sessionIdSchema).max(MAX_FOLLOWED_SESSIONS).nullish() });

const sessionsTurnsArgs = z.object({
  sessions: z
    .array(z.object({ sessionId: sessionIdSchema, afterSeq: z.number().int().min(-1).nullish() }))
    .min(1)
    .max(MAX_FOLLOWED_SESSIONS)
    .refine((l) => new Set(l.map((s) => s.sessionId)).size === l.length, 'a session is named twice'),
});

builder.subscriptionFields((t) => ({
  sessionEvents: t.field({
    type: EventRef,
    description: 'Catch-up from the log after afterSeq (omitted: from the start), then live: in seq order, no gaps, no duplicates.',
    args: { sessionId: t.arg.id({ required: true }), afterSeq: t.arg.int() },
    // Over graphql-ws, a plain selection of this stream is written straight to the socket (http/graphql/ws-delivery.ts).
    subscribe: async (_root, args, ctx) => {
      const p = parseArgs(sessionEventsArgs, args);
      await scopedReads(ctx).requireSession(p.sessionId);
      return ctx.services.live.sessionEvents(p.sessionId, p.afterSeq ?? -1, ctx.statements);
    },
    resolve: (event) => event,
  }),
  sessionTurns: t.field({
    type: TurnUpdateRef,
    description:
      "Live progress of the session's turns, whichever process runs them. With afterSeq: first the updates of what the log " +
      "holds after that seq (a step's stored text as one TEXT_DELTA), then live ones, with no gap and nothing twice, so a " +
      'client may subscribe after sending (afterSeq: the seq sendMessage returned) and still see the whole turn.',
    args: {
      sessionId: t.arg.id({ required: true }),
      afterSeq: t.arg.int({ description: 'Replay the turn updates of events after this seq first (-1: from the start).' }),
    },
    subscribe: async (_root, args, ctx) => {
      const p = parseArgs(sessionTurnsArgs, args);
      const reads = scopedReads(ctx);
      const session = await reads.requireSession(p.sessionId);
      // A client watching the turns is about to send: the agent gets ready.
      ctx.services.host.prewarm(session.id, session.eventCount);
      if (p.afterSeq == null) return ctx.services.live.sessionTurns(p.sessionId);
      const eventCount = async () => (await reads.requireSession(p.sessionId)).eventCount;
      return ctx.services.live.sessionTurnsAfter(p.sessionId, p.afterSeq, eventCount, ctx.statements);
    },
    resolve: (update) => update,
  }),
  sessionsTurns: t.field({
    type: TurnUpdateRef,
    description:
      `sessionTurns of up to ${MAX_FOLLOWED_SESSIONS} sessions of the caller's tenant in one subscription, interleaved ` +
      "(each update names its sessionId; each session's in its order, from its afterSeq as sessionTurns gives them): " +
      "a fan-out's variants followed with one place of the token's subscriptions, not one each. A session that is " +
      'deleted stops; the subscription ends when all have.',
    args: { sessions: t.arg({ type: [SessionTurnsFromInput], required: true }) },
    subscribe: async (_root, args, ctx) => {
      const p = parseArgs(sessionsTurnsArgs, args);
      const reads = scopedReads(ctx);
      // Every one the caller's (another tenant's is not found), before anything is followed.
      await Promise.all(p.sessions.map((s) => reads.requireSession(s.sessionId)));
      const eventCount = async (id: string) => (await reads.requireSession(id)).eventCount;
      return ctx.services.live.sessionsTurns(p.sessions, eventCount, ctx.statements);
    },
    resolve: (update) => update,
  }),
  sessionsChanged: t.field({
    type: SessionRef,
    description:
      "Sessions of the caller's tenant that were created, forked, imported or appended to (status, counters). " + 'Deletions are reported by sessionsDeleted.',
    args: {
      startWith: t.arg.idList({
        description:
          `Up to ${MAX_FOLLOWED_SESSIONS} sessions sent first, as they are once the subscription listens (one not found is left out): ` +
          'a client that reads, then subscribes, reads again when the first arrives and so misses no change made in between.',
      }),
    },
    subscribe: (_root, args, ctx) => {
      const p = parseArgs(sessionsChangedArgs, args);
      return ctx.services.live.sessionsChanged(ctx.scope, p.startWith ?? []);
    },
    resolve: (session) => session,
  }),
  sessionListChanges: t.field({
    type: SessionListChangeRef,
    description:
      'sessionsChanged for a client that holds a list: first a result with `listening` true, sent once the subscription listens ' +
      '(a client that read the list before reads again then, and so misses no change made in between, even with no row to start with), ' +
      'then one per changed session.',
    subscribe: (_root, _args, ctx) => ctx.services.live.sessionsChangedFromListening(ctx.scope),
    resolve: (change) => change,
  }),
  sessionsDeleted: t.field({
    type: DeleteSessionPayload,
    description: "Ids of the caller's tenant's sessions as they are deleted (a subtree in one payload, the deleted session first).",
    subscribe: (_root, _args, ctx) => ctx.services.live.sessionsDeleted(ctx.scope),
    resolve: (deleted) => deleted,
  }),
}));
