// A deletion's progress (docs/contract.md#deletion): the sessions vanish at
// once; the rows they leave are reclaimed after, in bounded chunks.
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs, sessionIdSchema } from '../input.ts';
import type { DeletionProgress } from '../../store/reclaim.ts';
import { scopedReads } from '../scoped-reads.ts';

export const SessionDeletion = builder.objectRef<DeletionProgress>('SessionDeletion').implement({
  description:
    'A deletion (deleteSession): its sessions are gone from every read at once; the events they wrote and the file contents only they ' +
    'stored are reclaimed after, in bounded chunks, by whichever server takes them (it continues after a restart).',
  fields: (t) => ({
    sessionId: t.exposeID('sessionId', { description: 'The session deleteSession named.' }),
    sessionCount: t.exposeInt('sessionCount', { description: 'Sessions deleted: the session and its descendants.' }),
    eventCount: t.exposeInt('eventCount', { description: 'Events they wrote, to reclaim.' }),
    reclaimedEventCount: t.exposeInt('reclaimedEventCount', { description: 'Of those, events deleted so far.' }),
    remainingEventCount: t.int({
      description: 'Events left to reclaim.',
      resolve: (d) => Math.max(0, d.eventCount - d.reclaimedEventCount),
    }),
    finished: t.boolean({ description: 'Everything is reclaimed: events and file contents.', resolve: (d) => d.finishedAt != null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    finishedAt: t.expose('finishedAt', { type: 'DateTime', nullable: true }),
  }),
});

const argsSchema = z.object({ sessionId: sessionIdSchema });

builder.queryFields((t) => ({
  sessionDeletion: t.field({
    type: SessionDeletion,
    nullable: true,
    description:
      "The progress of the latest deletion of one of the caller's sessions, by the id deleteSession named; null when there is none " +
      '(a finished deletion is kept 24 h).',
    args: { sessionId: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => (await scopedReads(ctx).deletion(parseArgs(argsSchema, args).sessionId)) ?? null,
  }),
}));
