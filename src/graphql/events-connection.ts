// The events connection (Relay shape) over keyset reads of the session log.
// Cursors are seqs; `afterSeq` is the contract's spelling of `after`. Pages
// may come from a hot standby: the session row (read from the primary) says
// how far the log goes, and what a standby lacks of that comes from the primary.
import { z } from 'zod';
import { parseArgs, pageArgs } from './input.ts';
import { DEFAULT_PAGE_SIZE } from './builder.ts';
import type { SessionLog, StoredEvent } from '../store/session-log.ts';

const seqCursor = z
  .string()
  .regex(/^-?\d{1,10}$/, 'must be a cursor returned by this connection')
  .transform(Number)
  .pipe(z.number().int().min(-1).max(2 ** 31 - 1));

const argsSchema = z.object({
  afterSeq: z.number().int().min(-1).nullish(),
  after: seqCursor.nullish(),
  before: seqCursor.nullish(),
});

export interface EventsConnectionArgs {
  afterSeq?: number | null;
  first?: number | null;
  last?: number | null;
  after?: string | null;
  before?: string | null;
}

export async function eventsConnection(log: SessionLog, session: { id: string; eventCount: number }, args: EventsConnectionArgs) {
  const { first, last } = pageArgs(args);
  const p = parseArgs(argsSchema, { afterSeq: args.afterSeq, after: args.after, before: args.before });
  const after = Math.max(p.afterSeq ?? -1, p.after ?? -1);
  let events: StoredEvent[];
  let hasNextPage = false;
  let hasPreviousPage = after >= 0;
  if (last != null || p.before != null) {
    // Backwards from `before` (default: the end), never past `after`.
    const before = Math.min(p.before ?? session.eventCount, session.eventCount);
    const limit = Math.min(last ?? first ?? DEFAULT_PAGE_SIZE, Math.max(0, before - after - 1));
    events = limit > 0 ? await log.pageBeforeFromStandby(session.id, before, limit, session.eventCount - 1) : [];
    hasPreviousPage = (events[0]?.seq ?? before) > after + 1;
    hasNextPage = before < session.eventCount;
  } else {
    const limit = first ?? DEFAULT_PAGE_SIZE;
    // One more row than asked tells whether a next page exists.
    events = limit > 0 ? await log.pageFromStandby(session.id, after, limit + 1, session.eventCount - 1) : [];
    hasNextPage = events.length > limit;
    if (hasNextPage) events = events.slice(0, limit);
  }
  const edges = events.map((node) => ({ cursor: String(node.seq), node }));
  return {
    edges,
    pageInfo: {
      hasNextPage,
      hasPreviousPage,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}
