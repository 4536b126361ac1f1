// A session's fork family for the dashboard's fork markers and tree view:
// where its children were forked (seq → how many) and every session of its
// tree. Mapping only: both are session-row reads (store/session-rows.ts).
import { builder } from '../builder.ts';
import { sessionsConnection } from '../sessions-connection.ts';
import { sessionConnectionColumns } from '../session-columns.ts';
import { SessionConnection, SessionRef } from './session.ts';

const ForkPointRef = builder.objectRef<{ seq: number; childCount: number }>('ForkPoint').implement({
  description: 'An event of a session that children were forked at (children(forkedAtSeq) lists them).',
  fields: (t) => ({
    seq: t.exposeInt('seq', { description: "The parent's seq: the children's forkedAtSeq." }),
    childCount: t.exposeInt('childCount', { description: 'Children forked at this seq (forks, branches, edits, fan-out variants).' }),
  }),
});

builder.prismaObjectFields('Session', (t) => ({
  forkPoints: t.field({
    type: [ForkPointRef],
    description: 'The seqs its children were forked at, ascending, each with how many (one grouped read of its children).',
    resolve: (s, _a, ctx) => ctx.store.sessions.forkPoints(ctx.scope.tenant, s.id),
  }),
  family: t.connection(
    {
      type: SessionRef,
      description: 'Every session of its fork tree: the root and its forks at any depth (itself included), oldest first.',
      resolve: (s, args, ctx, info) =>
        sessionsConnection(ctx.store.sessions, { tenant: ctx.scope.tenant, treeId: s.treeId, order: 'oldest' }, args, sessionConnectionColumns(info)),
    },
    SessionConnection,
  ),
}));
