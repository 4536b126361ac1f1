import { builder } from '../builder.ts';

export const EventRef = builder.prismaNode('Event', {
  id: { field: 'id' },
  nullable: true, // node(id) of a missing (or other tenant's) id is null, not an error
  // node(id) stays inside the caller's tenant.
  findUnique: (id, ctx) => ({ id, session: { tenant: ctx.scope.tenant } }),
  fields: (t) => ({
    seq: t.exposeInt('seq'),
    type: t.exposeString('type'),
    data: t.expose('data', { type: 'JSON' }),
    inherited: t.exposeBoolean('inherited', { description: 'Copied from a parent by a fork.' }),
    synthetic: t.exposeBoolean('synthetic', {
      description: 'Written by repair (fork or crash recovery), not by a real actor.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    sessionId: t.exposeID('sessionId'),
  }),
});
