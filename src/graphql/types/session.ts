import { builder } from '../builder.ts';
import { pageArgs } from '../input.ts';
import { EventRef } from './event.ts';
import { eventsConnection } from '../events-connection.ts';

export const SessionStatusEnum = builder.enumType('SessionStatus', {
  values: {
    IDLE: { description: 'No turn is open.' },
    RUNNING: { description: 'A turn is open.' },
  } as const,
});

export const SessionRef = builder.prismaNode('Session', {
  id: { field: 'id' },
  nullable: true, // node(id) of a missing (or other tenant's) id is null, not an error
  findUnique: (id, ctx) => ({ id, tenant: ctx.scope.tenant }),
  fields: (t) => ({
    title: t.exposeString('title', { nullable: true }),
    status: t.expose('status', { type: SessionStatusEnum }),
    formatVersion: t.exposeInt('formatVersion'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    eventCount: t.exposeInt('eventCount', { description: 'Length of the log: the next seq.' }),
    turnCount: t.exposeInt('turnCount'),
    parent: t.relation('parent', { nullable: true }),
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


// Connection type names are part of the contract (DESIGN §7): one SessionConnection
// for sessions and children, one EventConnection.
const SessionConnection = builder.connectionObject({ type: SessionRef, name: 'SessionConnection' });
const EventConnection = builder.connectionObject({ type: EventRef, name: 'EventConnection' });

builder.prismaObjectFields('Session', (t) => ({
  children: t.relatedConnection('children', {
    cursor: 'id',
    // Pothos would clamp an oversized page silently; every connection rejects it instead.
    query: (args) => (pageArgs(args), { orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] }),
  }, SessionConnection),
  // Keyset pages through the session log (store/session-log.ts): a page costs
  // its own rows, wherever it lies in the log and however deep the fork.
  events: t.connection({
    type: EventRef,
    description: 'The log in seq order. Cursors are seqs; `last`/`before` page backwards from the end.',
    args: { afterSeq: t.arg.int({ description: 'Only events with seq > afterSeq.' }) },
    select: { eventCount: true },
    resolve: (session, args, ctx) => eventsConnection(ctx.store.log, session, args),
  }, EventConnection),
}));

builder.queryFields((t) => ({
  session: t.prismaField({
    type: 'Session',
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) =>
      ctx.prisma.session.findFirst({ ...query, where: { id: String(id), tenant: ctx.scope.tenant } }),
  }),
  sessions: t.prismaConnection(
    {
      type: 'Session',
      cursor: 'id',
      args: {
        parentId: t.arg.id(),
        status: t.arg({ type: SessionStatusEnum }),
      },
      resolve: (query, _root, args, ctx) => {
        pageArgs(args);
        return ctx.prisma.session.findMany({
          ...query,
          where: {
            tenant: ctx.scope.tenant,
            ...(args.parentId ? { parentId: String(args.parentId) } : {}),
            ...(args.status ? { status: args.status } : {}),
          },
          orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        });
      },
    },
    SessionConnection,
  ),
}));
