// searchSessions: full-text search over the caller's sessions, one
// call onto store/session-search.ts. Cursors are opaque keysets of the list
// (title hits first, then events; each newest first): a page costs its own
// hits, never the ranking of every match.
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs } from '../input.ts';
import { EventRef } from './event.ts';
import { SessionRef } from './session.ts';
import { sessionColumns } from '../session-columns.ts';
import { scopedReads } from '../scoped-reads.ts';
import { DESCENDANTS_COUNTED, SNIPPET_START, SNIPPET_STOP, type SearchHit, type SearchKey, type SessionSearchHit } from '../../store/session-search.ts';

export const MAX_SEARCH_PAGE = 50;
const DEFAULT_SEARCH_PAGE = 20;
export const MAX_QUERY_CHARS = 500;

export const encodeSearchCursor = (k: SearchKey) => Buffer.from(JSON.stringify([k.title ? 0 : 1, k.at, k.sessionId, k.seq])).toString('base64url');

const BAD_CURSOR = 'must be a cursor returned by searchSessions';
const cursorSchema = z
  .string()
  .max(1000)
  .transform((s, ctx) => {
    try {
      return JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: BAD_CURSOR });
      return z.NEVER;
    }
  })
  .pipe(
    z.tuple(
      [
        z.union([z.literal(0), z.literal(1)]),
        z.number().int().min(-8.64e15).max(8.64e15),
        z.string().min(1).max(200),
        z
          .number()
          .int()
          .min(-1)
          .max(2 ** 31 - 1),
      ],
      { error: BAD_CURSOR },
    ),
  )
  .transform(([t, at, sessionId, seq]): SearchKey => ({ title: t === 0, at, sessionId, seq }));

const argsSchema = z.object({
  query: z
    .string()
    .trim()
    .min(1, 'must not be empty')
    .max(MAX_QUERY_CHARS, `at most ${MAX_QUERY_CHARS} characters`)
    .refine((q) => !q.includes('\0'), 'must not contain NUL characters'),
  first: z.number().int().min(0).max(MAX_SEARCH_PAGE).nullish(),
  after: cursorSchema.nullish(),
});

const SearchHitKindEnum = builder.enumType('SearchHitKind', {
  values: {
    TITLE: { description: "The session's title." },
    INPUT: { description: 'A user input (inbox/add text).' },
    MESSAGE: { description: "A model's answer (model/message text)." },
  } as const,
});

const SearchHitRef = builder.objectRef<SearchHit>('SearchHit').implement({
  description:
    'One match. An event matches once, at the session that wrote it: a fork shares its inherited prefix with its ancestors instead of ' +
    'copying it, so the forks that share the event are counted in `descendants`, not listed.',
  fields: (t) => ({
    session: t.field({
      type: SessionRef,
      description: 'The session that wrote the matching event (or has the title).',
      resolve: async (h, _a, ctx, info) => {
        const s = await ctx.sessionLoader.load(h.sessionId, sessionColumns(info), ctx.statements);
        if (!s) throw new Error(`session ${h.sessionId} of a search hit is gone`);
        return s;
      },
    }),
    seq: t.exposeInt('seq', {
      description: "The matching event's seq; for a title, the seq of the session/title event that set it (0 when none did, e.g. an import's header).",
    }),
    snippet: t.exposeString('snippet', {
      description: `The text around the match, plain text (not HTML), with the matched words between ${SNIPPET_START} and ${SNIPPET_STOP}.`,
    }),
    rank: t.exposeFloat('rank', { description: 'ts_rank of the match: how well it matches (the list is ordered by recency, not by rank).' }),
    kind: t.expose('kind', { type: SearchHitKindEnum }),
    descendants: t.exposeInt('descendants', {
      description: `Sessions forked from this one, at any depth, that share the matching event (or the title), counted up to ${DESCENDANTS_COUNTED}.`,
    }),
    event: t.field({
      type: EventRef,
      nullable: true,
      description: 'The matching event, read through `session` (null for a title).',
      resolve: (h, _a, ctx) => (h.kind === 'TITLE' ? null : scopedReads(ctx).log.event(h.sessionId, h.seq)),
    }),
  }),
});

const SearchHitConnection = builder.connectionObject({ type: SearchHitRef, name: 'SearchHitConnection' });

builder.queryFields((t) => ({
  searchSessions: t.field({
    type: SearchHitConnection,
    description:
      `Full-text search over the caller's session titles, user inputs and model messages (English stemming; websearch syntax: ` +
      `words, "a phrase", -excluded, or). Title matches first (newest session first), then inputs and messages (newest first). At most ${MAX_SEARCH_PAGE} hits per page. ` +
      `A page reads a bounded number of rows: one whose words are rare among many rows may hold fewer hits than asked, or none, with hasNextPage true; its endCursor goes on from where it stopped.`,
    args: {
      query: t.arg.string({ required: true }),
      first: t.arg.int({ description: `Hits per page (default ${DEFAULT_SEARCH_PAGE}, at most ${MAX_SEARCH_PAGE}).` }),
      after: t.arg.string({ description: "A previous page's endCursor." }),
    },
    resolve: async (_root, args, ctx) => {
      const { query, first, after } = parseArgs(argsSchema, { query: args.query, first: args.first, after: args.after });
      const limit = first ?? DEFAULT_SEARCH_PAGE;
      // One more hit than asked tells whether a next page exists. A page that
      // stopped at its bound of rows read (store/session-search.ts) has fewer
      // hits, maybe none, and its endCursor is where the reading stopped.
      const page =
        limit > 0 ? await ctx.store.search.sessions(query, { limit: limit + 1, after, statements: ctx.statements }) : { hits: [], resumeAfter: null };
      const hits = page.hits.slice(0, limit);
      const edges = hits.map((node) => ({ node, cursor: encodeSearchCursor(node.key) }));
      const resume = page.hits.length > limit ? null : page.resumeAfter;
      return {
        edges,
        pageInfo: {
          hasNextPage: page.hits.length > limit || resume !== null,
          hasPreviousPage: after != null,
          startCursor: edges[0]?.cursor ?? null,
          endCursor: resume ? encodeSearchCursor(resume) : (edges.at(-1)?.cursor ?? null),
        },
      };
    },
  }),
}));

// Session.search: matches within one session's log (its inherited
// prefix included), in seq order; cursors are seqs.
const SessionSearchHitRef = builder.objectRef<SessionSearchHit & { sessionId: string }>('SessionSearchHit').implement({
  description: "One match within a session's log: an input or an answer whose text matches.",
  fields: (t) => ({
    seq: t.exposeInt('seq', { description: "The matching event's seq." }),
    kind: t.expose('kind', { type: SearchHitKindEnum, description: 'INPUT or MESSAGE.' }),
    snippet: t.exposeString('snippet', {
      description: `The text around the match, plain text (not HTML), with the matched words between ${SNIPPET_START} and ${SNIPPET_STOP}.`,
    }),
    rank: t.exposeFloat('rank', { description: 'ts_rank of the match (hits are in seq order).' }),
    event: t.field({
      type: EventRef,
      description: 'The matching event, read through the session.',
      resolve: async (h, _a, ctx) => {
        const e = await scopedReads(ctx).log.event(h.sessionId, h.seq);
        if (!e) throw new Error(`event ${h.seq} of a search hit is gone`);
        return e;
      },
    }),
  }),
});
const SessionSearchHitConnection = builder.connectionObject({ type: SessionSearchHitRef, name: 'SessionSearchHitConnection' });

const sessionSearchArgs = z.object({
  query: argsSchema.shape.query,
  first: argsSchema.shape.first,
  after: z
    .string()
    .regex(/^\d{1,10}$/, 'must be a cursor returned by Session.search')
    .transform(Number)
    .nullish(),
});

builder.objectField('Session', 'search', (t) =>
  t.field({
    type: SessionSearchHitConnection,
    description:
      `Full-text search within this session's log (inputs and answers, the inherited prefix included; the syntax of searchSessions), ` +
      `in seq order. Cursors are seqs. At most ${MAX_SEARCH_PAGE} hits per page.`,
    args: {
      query: t.arg.string({ required: true }),
      first: t.arg.int({ description: `Hits per page (default ${DEFAULT_SEARCH_PAGE}, at most ${MAX_SEARCH_PAGE}).` }),
      after: t.arg.string({ description: "A previous page's endCursor (a seq)." }),
    },
    resolve: async (session, args, ctx) => {
      const { query, first, after } = parseArgs(sessionSearchArgs, { query: args.query, first: args.first, after: args.after });
      const limit = first ?? DEFAULT_SEARCH_PAGE;
      let hits =
        limit > 0
          ? await scopedReads(ctx).search.inSession(session.id, query, {
              afterSeq: after ?? -1,
              limit: limit + 1,
              endSeq: session.eventCount,
              statements: ctx.statements,
            })
          : [];
      const hasNextPage = hits.length > limit;
      if (hasNextPage) hits = hits.slice(0, limit);
      const edges = hits.map((h) => ({ node: { ...h, sessionId: session.id }, cursor: String(h.seq) }));
      return {
        edges,
        pageInfo: { hasNextPage, hasPreviousPage: after != null, startCursor: edges[0]?.cursor ?? null, endCursor: edges.at(-1)?.cursor ?? null },
      };
    },
  }),
);
