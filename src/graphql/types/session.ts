import { builder } from '../builder.ts';
import { PROPERTY_READ } from '../property-reads.ts';
import { EventRef } from './event.ts';
import { eventPageShape, eventsConnection, readFor } from '../events-connection.ts';
import { textBudgetOf } from '../request-texts.ts';
import { EVENT_ORIGINS, EventOriginEnum } from './event-filters.ts';
import { sessionsConnection } from '../sessions-connection.ts';
import { asSelected, selectsOnlyId, sessionColumns, sessionConnectionColumns } from '../session-columns.ts';
import type { SessionRow } from '../../store/session-rows.ts';

export const SessionStatusEnum = builder.enumType('SessionStatus', {
  values: {
    IDLE: { description: 'No turn is open.' },
    RUNNING: { description: 'A turn is open.' },
    WAITING: { description: 'A turn is open and waits: a tool call awaits approval (pendingApprovals; approveToolCall, denyToolCall).' },
  } as const,
});

// A relay node whose global id is the session id itself (builder.ts). node(id) and
// nodes(ids) read rows from the store, batched per request by the session loader
// (the tenant's view: a missing or another tenant's id is null, not an error).
export const SessionRef = builder.node('Session', {
  id: { resolve: (s) => s.id, ...PROPERTY_READ },
  loadManyWithoutCache: (ids, ctx) => Promise.all(ids.map((id) => ctx.sessionLoader.load(id, null, ctx.statements))),
  fields: (t) => ({
    title: t.exposeString('title', { nullable: true }),
    status: t.expose('status', { type: SessionStatusEnum }),
    formatVersion: t.exposeInt('formatVersion'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    eventCount: t.exposeInt('eventCount', { description: 'Length of the log: the next seq.' }),
    turnCount: t.exposeInt('turnCount'),
    lastTurnFailed: t.exposeBoolean('lastTurnFailed', {
      description:
        'Its last ended turn failed (turn/end reason failed; a fork starts false): what the dashboard shows as failed rather than idle. A column of its row: free in lists.',
    }),
    forkedAtSeq: t.exposeInt('forkedAtSeq', {
      nullable: true,
      description: 'Last parent seq this fork inherits (-1: none).',
    }),
    inheritedEventCount: t.exposeInt('inheritedEventCount', {
      description: 'Number of parent events the fork inherits, shared with the parent, not copied (marker and closers not counted).',
    }),
    firstLiveSeq: t.exposeInt('firstLiveSeq', {
      description: "Length of the fork seed: the first seq written by this session's own agent.",
    }),
  }),
});

// Connection type names are part of the contract (docs/contract.md#graphql-names): one SessionConnection
// for sessions and children, one EventConnection.
export const SessionConnection = builder.connectionObject({ type: SessionRef, name: 'SessionConnection' });
const EventConnection = builder.connectionObject({ type: EventRef, name: 'EventConnection' });

builder.objectFields('Session', (t) => ({
  // Batched per request (one statement for a page's parents); no read at all
  // when only the id is asked (the foreign key is that id).
  parent: t.field({
    type: SessionRef,
    nullable: true,
    resolve: (s, _a, ctx, info) => {
      if (s.parentId == null) return null;
      return selectsOnlyId(info) ? ({ id: s.parentId } as SessionRow) : ctx.sessionLoader.load(s.parentId, sessionColumns(info), ctx.statements);
    },
  }),
  children: t.connection(
    {
      type: SessionRef,
      description: 'Forks and branches of this session, oldest first.',
      args: { forkedAtSeq: t.arg.int({ description: 'Only the children forked at this seq (Session.forkPoints lists them).' }) },
      resolve: (s, args, ctx, info) =>
        sessionsConnection(
          ctx.store.sessions,
          { parentId: s.id, forkedAtSeq: args.forkedAtSeq, order: 'oldest', statements: ctx.statements },
          args,
          sessionConnectionColumns(info),
        ),
    },
    SessionConnection,
  ),
  siblings: t.connection(
    {
      type: SessionRef,
      description: "The parent's other forks and branches (a fan-out's other variants), oldest first; none for a session without parent.",
      resolve: (s, args, ctx, info) =>
        s.parentId == null
          ? { edges: [], pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null } }
          : sessionsConnection(
              ctx.store.sessions,
              { parentId: s.parentId, excludeId: s.id, order: 'oldest', statements: ctx.statements },
              args,
              sessionConnectionColumns(info),
            ),
    },
    SessionConnection,
  ),
  commonPrefix: t.int({
    args: { with: t.arg.id({ required: true }) },
    description:
      "The last seq this session and `with` share (their common ancestor's cut: seqs 0..commonPrefix are the same events " +
      'in both, stored once); the first divergent seq is one more. -1: nothing shared (e.g. sessions of different trees).',
    resolve: (s, args, ctx) => ctx.store.commonPrefix(s, String(args.with), ctx.statements),
  }),
  // Keyset pages through the session log (store/session-log.ts): a page costs
  // its own rows, wherever it lies in the log and however deep the fork.
  events: t.connection(
    {
      type: EventRef,
      description:
        'The log in seq order. Cursors are seqs; `last`/`before` page backwards from the end. With `types` or `origin`, only the ' +
        'events that pass (pages of matches, served from the indexes: gaps between them cost nothing). A page of large events holds ' +
        'fewer than asked (FORKLINE_PAGE_BYTES of their data, for all the pages of one request together: a page that finds ' +
        'none left comes empty; a page that does not select `data` reads none and is not cut): ' +
        'page on while hasNextPage (backwards: hasPreviousPage) is true.',
      args: {
        afterSeq: t.arg.int({ description: 'Only events with seq > afterSeq.' }),
        types: t.arg.stringList({ description: 'Only events of these types (at most 20).' }),
        origin: t.arg({ type: EventOriginEnum, description: 'Only events of this origin (default ANY).' }),
      },
      // The arguments written out: `{ ...args, origin }` (an object spread followed by a property) is a runtime call in V8.
      resolve: (session, args, ctx, info) =>
        eventsConnection(
          ctx.store.log,
          session,
          {
            afterSeq: args.afterSeq,
            first: args.first,
            last: args.last,
            after: args.after,
            before: args.before,
            types: args.types,
            origin: args.origin && EVENT_ORIGINS[args.origin],
          },
          readFor(eventPageShape(info), ctx),
          textBudgetOf(ctx, info),
        ),
    },
    EventConnection,
  ),
}));

// Session.workspace lives beside the tools that write it.
import './workspace.ts';
// Session.files, file and fileChanges: the file workspace.
import './files.ts';

// The hot reads (a session, a sessions page) are prepared statements on the pg
// pool (store/session-rows.ts), not Prisma, reading the columns the query
// selects (session-columns.ts); `npm run bench` (readThroughput) shows the gain. Rows read
// so carry only those columns; the Session fields below read nothing else.
builder.queryFields((t) => ({
  session: t.field({
    type: SessionRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    // A query's read: from a hot standby that has caught up with the request, else the primary; the
    // fields that read the log read it as of this row's eventCount (store/log-as-of.ts logAsOf), wherever it came from.
    resolve: async (_root, { id }, ctx, info) => asSelected(await ctx.store.getSession(String(id), sessionColumns(info), 'standby', ctx.statements)),
  }),
  sessions: t.connection(
    {
      type: SessionRef,
      args: {
        parentId: t.arg.id(),
        status: t.arg({ type: SessionStatusEnum }),
        changedSince: t.arg({
          type: 'DateTime',
          description:
            "Only sessions created, forked, imported or appended to at or after this time (a session's updatedAt), least recently changed first, so a row that changes while you page moves to the end and is read again, never skipped; its cursors belong to this order. A client that saw the list up to updatedAt T resumes with T less a few seconds (a change is stamped when its transaction starts, and commits a moment later). Deletions are not listed: compare sessionCount.",
        }),
      },
      resolve: (_root, args, ctx, info) =>
        sessionsConnection(
          ctx.store.sessions,
          args.changedSince
            ? { parentId: args.parentId, status: args.status, changedSince: args.changedSince, order: 'changed', statements: ctx.statements }
            : { parentId: args.parentId, status: args.status, order: 'newest', statements: ctx.statements },
          args,
          sessionConnectionColumns(info),
        ),
    },
    SessionConnection,
  ),
  sessionCount: t.int({
    description: "How many sessions the caller's tenant has (a list resumed with sessions(changedSince:) holds every deletion when its count matches).",
    resolve: (_root, _args, ctx) => ctx.store.sessions.count(ctx.statements),
  }),
}));
