// A session's fork family for the dashboard's fork markers, tree view and
// fan-out view: where its children were forked (seq → how many), every
// session of its tree (session-row reads, store/session-rows.ts), and the
// model a session's log sets (a column of its row), which tells variants apart.
import { builder } from '../builder.ts';
import { sessionsConnection } from '../sessions-connection.ts';
import { sessionConnectionColumns } from '../session-columns.ts';
import { SessionConnection, SessionRef } from './session.ts';
import { modelOfRow } from '../../store/session-rows.ts';

const ForkPointRef = builder.objectRef<{ seq: number; childCount: number }>('ForkPoint').implement({
  description: 'An event of a session that children were forked at (children(forkedAtSeq) lists them).',
  fields: (t) => ({
    seq: t.exposeInt('seq', { description: "The parent's seq: the children's forkedAtSeq." }),
    childCount: t.exposeInt('childCount', { description: 'Children forked at this seq (forks, branches, edits, fan-out variants).' }),
  }),
});

const SessionModelRef = builder.objectRef<{ provider: string; model: string }>('SessionModel').implement({
  description: 'A model as a session/model event names it.',
  fields: (t) => ({
    provider: t.exposeString('provider'),
    model: t.exposeString('model'),
  }),
});

builder.objectFields('Session', (t) => ({
  model: t.field({
    type: SessionModelRef,
    nullable: true,
    description:
      "The model its log sets: its last session/model event (a fork's own, or inherited); null when none does (the host's default model). A column of the row (kept by appends, forks and imports): a list of sessions reads no log for it.",
    resolve: (s) => modelOfRow(s),
  }),
  forkPoints: t.field({
    type: [ForkPointRef],
    description: 'The seqs its children were forked at, ascending, each with how many (one grouped read of its children).',
    resolve: (s, _a, ctx) => ctx.store.sessions.forkPoints(s.id, ctx.statements),
  }),
  family: t.connection(
    {
      type: SessionRef,
      description: 'Every session of its fork tree: the root and its forks at any depth (itself included), oldest first.',
      resolve: (s, args, ctx, info) =>
        sessionsConnection(ctx.store.sessions, { treeId: s.treeId, order: 'oldest', statements: ctx.statements }, args, sessionConnectionColumns(info)),
    },
    SessionConnection,
  ),
}));
