// Sessions connections (Relay shape) over keyset pages of session rows
// (store/session-rows.ts): the sessions list (newest first), a session's
// children (oldest first), and the sessions changed since a time (least
// recently changed first). A cursor is the row's keyset, `<createdAt>|<id>`,
// or `changed:<updatedAt>|<id>` in the changed order: it stays valid when the
// session it names is deleted or changes again.
import { z } from 'zod';
import { badInput } from '../core/errors.ts';
import { parseArgs, pageArgs } from './input.ts';
import { DEFAULT_PAGE_SIZE } from './builder.ts';
import type { SessionColumns, SessionKey, SessionRow } from '../store/session-rows.ts';
import type { TenantPageQuery, TenantStore } from '../store/session-store.ts';
import { asSelected } from './session-columns.ts';

const CHANGED = 'changed:';
const NOT_OURS = 'must be a cursor returned by this connection';

/** A cursor of one order: a changed-order cursor is refused by the time orders and the other way round. */
const cursorOf = (changed: boolean) =>
  z
    .string()
    .regex(changed ? /^changed:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\|.+$/ : /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\|.+$/, NOT_OURS)
    .transform((s): SessionKey => {
      const key = changed ? s.slice(CHANGED.length) : s;
      const bar = key.indexOf('|');
      return { at: new Date(key.slice(0, bar)), id: key.slice(bar + 1) };
    })
    .refine((k) => !Number.isNaN(k.at.getTime()), NOT_OURS);

const argsSchemas = {
  time: z.object({ after: cursorOf(false).nullish(), before: cursorOf(false).nullish() }),
  changed: z.object({ after: cursorOf(true).nullish(), before: cursorOf(true).nullish() }),
};

export interface SessionsConnectionArgs {
  first?: number | null;
  last?: number | null;
  after?: string | null;
  before?: string | null;
}

export const sessionCursor = (s: SessionRow) => `${s.createdAt.toISOString()}|${s.id}`;
const changedCursor = (s: SessionRow) => `${CHANGED}${s.updatedAt.toISOString()}|${s.id}`;

/**
 * An edge formats its cursor only when asked for (a page of 50 is 50
 * toISOString calls otherwise); a class, not an object literal with a getter,
 * so an edge is one small object, not an object and a closure.
 */
class SessionEdge {
  constructor(readonly node: SessionRow) {}
  get cursor(): string {
    return sessionCursor(this.node);
  }
}
class ChangedSessionEdge extends SessionEdge {
  override get cursor(): string {
    return changedCursor(this.node);
  }
}

/**
 * A page's pageInfo: cursors formatted when asked for, by prototype getters.
 * Not an object literal with getters: V8 keeps a literal's getters in an
 * accessor pair it allocates in the old generation, so the getters' closures
 * over the page, and the page's rows with them, survived every young-generation
 * GC until the next full one and were promoted (a ten-line script shows the
 * same: megabytes promoted per scavenge with the literal, none with a class).
 * On the readThroughput sessions page the class cuts what each scavenge
 * promotes, its pauses and the server CPU per request.
 */
class SessionPageInfo {
  constructor(
    readonly hasNextPage: boolean,
    readonly hasPreviousPage: boolean,
    private readonly edges: readonly SessionEdge[],
  ) {}
  get startCursor(): string | null {
    return this.edges[0]?.cursor ?? null;
  }
  get endCursor(): string | null {
    return this.edges.at(-1)?.cursor ?? null;
  }
}

export async function sessionsConnection(
  rows: TenantStore['sessions'],
  query: Omit<TenantPageQuery, 'from' | 'backward' | 'limit'>,
  args: SessionsConnectionArgs,
  columns: SessionColumns = null,
) {
  const { first, last } = pageArgs(args);
  const changed = query.order === 'changed';
  const { after, before } = parseArgs(changed ? argsSchemas.changed : argsSchemas.time, { after: args.after, before: args.before });
  if (after && before) throw badInput('after and before cannot be used together');
  if (first != null && before) throw badInput('first and before cannot be used together: use last with before');
  if (last != null && after) throw badInput('last and after cannot be used together: use first with after');
  const backward = last != null || before != null;
  const limit = (backward ? last : first) ?? DEFAULT_PAGE_SIZE;
  // One more row than asked tells whether the page has a neighbour that way.
  // The page's own fields first, then the query's (which has none of them): V8 builds `{ ...query, limit }`, an object
  // spread followed by properties, by a runtime call of microseconds, and `{ limit, ...query }` inline.
  let page = limit > 0 ? await rows.page({ from: after ?? before, backward, limit: limit + 1, ...query }, columns) : [];
  const more = page.length > limit;
  if (more) page = backward ? page.slice(1) : page.slice(0, limit);
  const Edge = changed ? ChangedSessionEdge : SessionEdge;
  const edges = page.map((node) => new Edge(asSelected(node)));
  return { edges, pageInfo: new SessionPageInfo(backward ? before != null : more, backward ? more : after != null, edges) };
}
