// The events connection (Relay shape) over keyset reads of the session log.
// Cursors are seqs; `afterSeq` is the contract's spelling of `after`. Pages
// may come from a hot standby: the session row (read from the primary) says
// how far the log goes, and what a standby lacks of that comes from the primary.
// A page whose selection does not ask for the events' data reads none of it.
import { z } from 'zod';
import { parseArgs, pageArgs } from './input.ts';
import { DEFAULT_PAGE_SIZE } from './builder.ts';
import { fieldNames, perSelection, subSelections } from './selection.ts';
import type { BoundedEvents, EventOrigin, PageShape, StoredEvent } from '../store/session-log.ts';
import type { TenantStore } from '../store/session-store.ts';
import type { StatementScope } from '../db/statement-deadlines.ts';

const seqCursor = z
  .string()
  .regex(/^-?\d{1,10}$/, 'must be a cursor returned by this connection')
  .transform(Number)
  .pipe(
    z
      .number()
      .int()
      .min(-1)
      .max(2 ** 31 - 1),
  );

const NOTHING: BoundedEvents = { events: [], cut: false };

/** Event fields answered without the event's data; any other (`data`, or a field added later) reads it. */
const FIELDS_WITHOUT_DATA = new Set(['__typename', 'id', 'seq', 'type', 'inherited', 'synthetic', 'createdAt', 'sessionId']);

/**
 * What an EventConnection field's page reads: no data unless its nodes'
 * selection (through fragments) names a field that needs it. A page read
 * without data is a few bytes an event however large the events are, so
 * FORKLINE_PAGE_BYTES does not cut it.
 */
export const eventPageShape = perSelection((info): PageShape => {
  const edges = info.fieldNodes.flatMap((f) => subSelections(f.selectionSet, 'edges', info.fragments));
  const names = new Set<string>();
  for (const node of edges.flatMap((e) => subSelections(e, 'node', info.fragments))) fieldNames(node, info.fragments, names);
  return { data: [...names].some((n) => !FIELDS_WITHOUT_DATA.has(n)) };
});

/** Types a filter names at most (each is its own index scan). */
export const MAX_FILTER_TYPES = 20;

const argsSchema = z.object({
  afterSeq: z.number().int().min(-1).nullish(),
  after: seqCursor.nullish(),
  before: seqCursor.nullish(),
  types: z.array(z.string().min(1).max(200)).max(MAX_FILTER_TYPES).nullish(),
});

export interface EventsConnectionArgs {
  afterSeq?: number | null;
  first?: number | null;
  last?: number | null;
  after?: string | null;
  before?: string | null;
  /** Only events of these types (any when empty). */
  types?: readonly string[] | null;
  /** Only events of this origin (default any). */
  origin?: EventOrigin | null;
}

export async function eventsConnection(
  log: TenantStore['log'],
  session: { id: string; eventCount: number },
  args: EventsConnectionArgs,
  shape: PageShape = {},
) {
  const { first, last } = pageArgs(args);
  const p = parseArgs(argsSchema, { afterSeq: args.afterSeq, after: args.after, before: args.before, types: args.types });
  const after = Math.max(p.afterSeq ?? -1, p.after ?? -1);
  const filter = { types: [...new Set(p.types ?? [])], origin: args.origin ?? 'any' };
  if (filter.types.length || filter.origin !== 'any') return filteredConnection(log, session, filter, after, p.before ?? null, first, last, shape);
  let events: StoredEvent[];
  let hasNextPage: boolean;
  let hasPreviousPage = after >= 0;
  if (last != null || p.before != null) {
    // Backwards from `before` (default: the end), never past `after`.
    const before = Math.min(p.before ?? session.eventCount, session.eventCount);
    const limit = Math.min(last ?? first ?? DEFAULT_PAGE_SIZE, Math.max(0, before - after - 1));
    events = limit > 0 ? (await log.pageBeforeFromStandby(session.id, before, limit, session.eventCount - 1, shape)).events : [];
    hasPreviousPage = (events[0]?.seq ?? before) > after + 1;
    hasNextPage = before < session.eventCount;
  } else {
    const limit = first ?? DEFAULT_PAGE_SIZE;
    // One more row than asked tells whether a next page exists; so does a page cut short by its bytes.
    const read = limit > 0 ? await log.pageFromStandby(session.id, after, limit + 1, session.eventCount - 1, shape) : NOTHING;
    events = read.events;
    hasNextPage = events.length > limit || read.cut;
    if (events.length > limit) events = events.slice(0, limit);
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

/**
 * The connection over the events that pass a filter: pages of matches, read
 * by the store from the indexes (never the log between them). Forward from
 * `after`, or backward from `before` (default: the end) with `last`.
 */
async function filteredConnection(
  log: TenantStore['log'],
  session: { id: string; eventCount: number },
  filter: { types: string[]; origin: EventOrigin },
  after: number,
  before: number | null,
  first: number | null | undefined,
  last: number | null | undefined,
  shape: PageShape,
) {
  const end = session.eventCount;
  const backward = last != null || before != null;
  const limit = (backward ? (last ?? first) : first) ?? DEFAULT_PAGE_SIZE;
  const to = Math.min(before ?? end, end) - 1;
  // One more row than asked tells whether another page exists that way; so does a page cut short by its bytes.
  const read = limit > 0 ? await log.filtered(session.id, filter, { fromSeq: after + 1, toSeq: to, limit: limit + 1, descending: backward }, shape) : NOTHING;
  let events = read.events;
  const more = events.length > limit || read.cut;
  if (events.length > limit) events = events.slice(0, limit);
  if (backward) events.reverse();
  const edges = events.map((node) => ({ cursor: String(node.seq), node }));
  return {
    edges,
    pageInfo: {
      hasNextPage: backward ? to < end - 1 : more,
      hasPreviousPage: backward ? more : after >= 0,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}

/** `shape`, read for the operation of `ctx`: in its statement scope (plugins/statement-deadlines.ts). */
export const readFor = (shape: PageShape, ctx: { statements?: StatementScope }): PageShape =>
  ctx.statements ? { data: shape.data, statements: ctx.statements } : shape;
