// The events connection (Relay shape) over keyset reads of the session log.
// Cursors are seqs; `afterSeq` is the contract's spelling of `after`. Pages
// may come from a hot standby: the session row (read from the primary) says
// how far the log goes, and what a standby lacks of that comes from the primary.
// A page whose selection does not ask for the events' data reads none of it;
// the pages of one request that do share its budget (FORKLINE_PAGE_BYTES).
import { z } from 'zod';
import { parseArgs, pageArgs } from './input.ts';
import { DEFAULT_PAGE_SIZE } from './builder.ts';
import { fieldNames, perSelection, subSelections } from './selection.ts';
import type { BoundedEvents, EventOrigin, PageShape, StoredEvent } from '../store/session-log.ts';
import type { TenantStore } from '../store/session-store.ts';
import type { StatementScope } from '../db/statement-deadlines.ts';
import type { TextBudget } from '../core/text-budget.ts';

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

/** The page asked for, its arguments checked. */
interface PageAsked {
  first: number | null | undefined;
  last: number | null | undefined;
  after: number;
  before: number | null;
  filter: { types: string[]; origin: EventOrigin };
}

/**
 * A page of the events connection. With `budget` (the request's: graphql/request-texts.ts), a page that reads data
 * holds what is left of it, plus the one event that passes it: a request asking for many pages (under a page of
 * sessions, in aliases) holds one page's bytes in all, not one per page (docs/operations.md "Memory and time"). The
 * page reserves what is left while it reads and settles with what it used; a page that finds none left comes
 * empty, saying there is more (asked again on its own, it comes whole).
 */
export async function eventsConnection(
  log: TenantStore['log'],
  session: { id: string; eventCount: number },
  args: EventsConnectionArgs,
  shape: PageShape = {},
  budget?: TextBudget,
): Promise<Connection> {
  const { first, last } = pageArgs(args);
  const p = parseArgs(argsSchema, { afterSeq: args.afterSeq, after: args.after, before: args.before, types: args.types });
  const asked: PageAsked = {
    first,
    last,
    after: Math.max(p.afterSeq ?? -1, p.after ?? -1),
    before: p.before ?? null,
    filter: { types: [...new Set(p.types ?? [])], origin: args.origin ?? 'any' },
  };
  if (!budget || shape.data === false) return pageOf(log, session, asked, shape);
  const reserved = await budget.reserveAll();
  let used = reserved;
  try {
    if (reserved === 0) return leftOut(session, asked);
    const page = await pageOf(log, session, asked, { ...shape, bytes: reserved });
    used = page.dataBytes ?? reserved;
    return page;
  } finally {
    budget.settle(reserved, used);
  }
}

interface Connection {
  edges: Array<{ cursor: string; node: StoredEvent }>;
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  /** The data bytes the page holds, when read under a budget. */
  dataBytes?: number;
}

/** A page left empty (the request's budget is spent): more on the side it reads towards, if the range holds any. */
function leftOut(session: { eventCount: number }, { last, after, before }: PageAsked): Connection {
  const end = Math.min(before ?? session.eventCount, session.eventCount);
  const backward = last != null || before != null;
  const any = end - after > 1;
  return {
    edges: [],
    pageInfo: { hasNextPage: backward ? end < session.eventCount : any, hasPreviousPage: backward ? any : after >= 0, startCursor: null, endCursor: null },
  };
}

async function pageOf(
  log: TenantStore['log'],
  session: { id: string; eventCount: number },
  { first, last, after, before, filter }: PageAsked,
  shape: PageShape,
): Promise<Connection> {
  if (filter.types.length || filter.origin !== 'any') return filteredConnection(log, session, filter, after, before, first, last, shape);
  let events: StoredEvent[];
  let hasNextPage: boolean;
  let hasPreviousPage = after >= 0;
  let dataBytes: number | undefined;
  if (last != null || before != null) {
    // Backwards from `before` (default: the end), never past `after`.
    const end = Math.min(before ?? session.eventCount, session.eventCount);
    const limit = Math.min(last ?? first ?? DEFAULT_PAGE_SIZE, Math.max(0, end - after - 1));
    const read = limit > 0 ? await log.pageBeforeFromStandby(session.id, end, limit, session.eventCount - 1, shape) : NOTHING;
    events = read.events;
    dataBytes = read.bytes;
    hasPreviousPage = (events[0]?.seq ?? end) > after + 1;
    hasNextPage = end < session.eventCount;
  } else {
    const limit = first ?? DEFAULT_PAGE_SIZE;
    // One more row than asked tells whether a next page exists; so does a page cut short by its bytes.
    const read = limit > 0 ? await log.pageFromStandby(session.id, after, limit + 1, session.eventCount - 1, shape) : NOTHING;
    events = read.events;
    dataBytes = read.bytes;
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
    dataBytes,
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
): Promise<Connection> {
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
    dataBytes: read.bytes,
  };
}

/** `shape`, read for the operation of `ctx`: in its statement scope (plugins/statement-deadlines.ts). */
export const readFor = (shape: PageShape, ctx: { statements?: StatementScope }): PageShape =>
  ctx.statements ? { data: shape.data, statements: ctx.statements } : shape;
