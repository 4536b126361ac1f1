// Events are read through the session log (store/session-log.ts), never through
// Prisma: their ids are derived from (the session read through, seq), and a
// fork's inherited events live in its ancestors' rows.
import { builder } from '../builder.ts';
import { PROPERTY_READ } from '../property-reads.ts';
import { parseEventId } from '../../store/ids.ts';
import type { StoredEvent } from '../../store/session-log.ts';
import { scopedReads } from '../scoped-reads.ts';

export const EventRef = builder.node(builder.objectRef<StoredEvent>('Event'), {
  id: { resolve: (e) => e.id, ...PROPERTY_READ },
  // node(id) stays inside the caller's tenant; a missing or other tenant's id is null.
  loadOne: async (id, ctx) => {
    const ref = parseEventId(id);
    const session =
      ref && (await ctx.store.getSession(ref.sessionId, ['eventCount', 'treeId', 'inheritedRanges', 'inheritedEventCount'], 'primary', ctx.statements));
    if (!ref || !session || ref.seq >= session.eventCount) return null;
    return (await scopedReads(ctx).log.event(session.id, ref.seq)) ?? null;
  },
  isTypeOf: (value) => typeof value === 'object' && value !== null && typeof (value as StoredEvent).seq === 'number' && 'synthetic' in value,
  fields: (t) => ({
    seq: t.exposeInt('seq'),
    type: t.exposeString('type'),
    data: t.expose('data', { type: 'JSON' }),
    inherited: t.exposeBoolean('inherited', { description: 'Part of the prefix a fork took from its parent.' }),
    synthetic: t.exposeBoolean('synthetic', {
      description: 'Written by repair (fork or crash recovery), not by a real actor.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    sessionId: t.exposeID('sessionId', { description: 'The session this event was read through.' }),
  }),
});
