// GET /sessions/<id>/events?after=<seq>&first=<n>: a page of a session's log
// at a stable URL, for HTTP caches (docs/api.md "Event pages over GET"). The
// log's past never changes (docs/contract.md#log), so a page that is full and
// has a next page is final: it is answered with an ETag and
// `Cache-Control: immutable`, and a conditional GET for it is a 304 after one
// session-row read (the caller's tenant), no events read. A page that touches
// the head of the log (short, or the last one) may still grow: `no-store`.
//
// The page is the GraphQL events connection itself: the door runs one fixed
// query through yoga's pipeline (the same store read, resolvers, limits,
// scopes, JIT and result serialisation as POST /graphql), selecting every
// field of Event the schema has. The body is that query's GraphQL response.
import type http from 'node:http';
import { createHash } from 'node:crypto';
import { isObjectType, parse, type ExecutionResult, type GraphQLSchema } from 'graphql';
import type { YogaServerInstance } from 'graphql-yoga';
import { z } from 'zod';
import type { Context } from '../../graphql/context.ts';
import type { TenantStores } from '../../host/services.ts';
import type { Guard } from '../guard.ts';
import type { DoorStatements } from '../door-statements.ts';
import { reply, replyError } from '../http-body.ts';
import { EVENT_PAGE_PATH } from '../token-connections.ts';
import { requestOf } from './fast-lane.ts';
import { isOver, responseTooLarge } from '../../graphql/plugins/response-size.ts';

/** Pages are at most this long, as in the GraphQL connection (graphql/builder.ts MAX_PAGE_SIZE). */
const MAX_EVENT_PAGE = 500;
const DEFAULT_EVENT_PAGE = 100;
/**
 * How long a shared cache (a proxy) may answer a final page without asking
 * again. Shared caches key on the token (Vary: Authorization); this bounds how
 * long a revoked token or a deleted session is still answered from one. A
 * revalidation (If-None-Match) costs the server a session-row read.
 */
const SHARED_CACHE_SECONDS = 60;
const FINAL_PAGE_CACHE = `max-age=31536000, s-maxage=${SHARED_CACHE_SECONDS}, immutable`;

/** The HTTP status of a page's GraphQL error, by its code. */
const STATUS_OF: Record<string, number> = { BAD_USER_INPUT: 400, UNAUTHENTICATED: 401, FORBIDDEN: 403, SERVICE_UNAVAILABLE: 503 };

const queryOf = z
  .object({
    after: z
      .string()
      .regex(/^-?\d{1,10}$/, 'after must be a seq (an integer >= -1)')
      .transform(Number)
      .pipe(
        z
          .number()
          .int()
          .min(-1)
          .max(2 ** 31 - 1),
      )
      .default(-1),
    first: z
      .string()
      .regex(/^\d{1,4}$/, `first must be an integer 1..${MAX_EVENT_PAGE}`)
      .transform(Number)
      .pipe(z.number().int().min(1).max(MAX_EVENT_PAGE))
      .default(DEFAULT_EVENT_PAGE),
  })
  .strict();

/** The query a page runs: every field of Event (a field added to the schema is served with it). */
function eventPageQuery(schema: GraphQLSchema): string {
  const event = schema.getType('Event');
  if (!isObjectType(event)) throw new Error('the schema has no Event type');
  const fields = Object.values(event.getFields())
    .filter((f) => f.args.length === 0)
    .map((f) => f.name);
  return (
    `query EventPage($id: ID!, $after: Int!, $first: Int!) { session(id: $id) { events(afterSeq: $after, first: $first) { ` +
    `edges { cursor node { ${fields.join(' ')} } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }`
  );
}

interface PageData {
  session: { events: { edges: unknown[]; pageInfo: { hasNextPage: boolean } } } | null;
}

export interface EventPagesOptions {
  yoga: YogaServerInstance<{ req?: http.IncomingMessage }, Context>;
  guard: Guard;
  store: TenantStores;
  /** The response-size ceiling (graphql/plugins/response-size.ts), over which a page is refused. */
  maxResponseBytes: number;
  /** The conditional GET's row read: the request's scope (its page is a query: the operation's own). */
  statements: DoorStatements;
}

export function eventPages(opts: EventPagesOptions) {
  const { yoga, guard, store } = opts;
  const text = eventPageQuery(yoga.getEnveloped().schema);
  const document = parse(text, { noLocation: true });
  // The ETag names the page (the URL names the session) and the query's shape: a new Event field changes it.
  const shape = createHash('sha256').update(text).digest('base64url').slice(0, 12);
  const etagOf = (after: number, first: number) => `"${shape}.${after}.${first}"`;
  /** Full, with a next page: what the log holds below its end never changes. */
  const isFinal = (after: number, first: number, eventCount: number) => after + first + 1 < eventCount;

  return async (req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> => {
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return replyError(res, 405, 'BAD_USER_INPUT', 'GET /sessions/<id>/events?after=<seq>&first=<n>', { allow: 'GET, HEAD' });
    const principal = guard.callerOf(req, res);
    if (!principal) return;
    const match = EVENT_PAGE_PATH.exec(path);
    const url = new URL(req.url ?? '/', 'http://x');
    const parsed = queryOf.safeParse(Object.fromEntries(url.searchParams));
    if (!match || !parsed.success) {
      const why = parsed.success ? 'name the session: /sessions/<id>/events' : parsed.error.issues.map((i) => i.message).join('; ');
      return replyError(res, 400, 'BAD_USER_INPUT', why);
    }
    let id: string;
    try {
      id = decodeURIComponent(match[1]);
    } catch {
      return replyError(res, 400, 'BAD_USER_INPUT', 'the session id is not a valid URL component');
    }
    const { after, first } = parsed.data;
    const etag = etagOf(after, first);
    const cors = guard.corsHeaders(req);
    const vary = ['authorization', ...(cors.vary ? [cors.vary] : [])].join(', ');
    const cached = { ...cors, etag, 'cache-control': FINAL_PAGE_CACHE, vary };

    // Split on the commas alone: /\s*,\s*/ tried every start inside a run of spaces and scanned the rest of it
    // each time, so a header of 16 KiB of spaces cost the event loop a quadratic scan per request.
    if (req.headers['if-none-match']?.split(',').some((tag) => tag.trim() === etag)) {
      // The caller's tenant still holds the session, and the page is still final: nothing to send.
      const session = await store.forTenant({ tenant: principal.tenant }).getSession(id, ['eventCount'], 'standby', opts.statements(res, 'request'));
      if (session && isFinal(after, first, session.eventCount)) return void res.writeHead(304, cached).end();
    }

    // With its response: the operation's statements are cancelled once the client has gone (Context.gone).
    const enveloped = yoga.getEnveloped({ req, res, request: requestOf(req, yoga.fetchAPI), params: { query: text, variables: { id, after, first } } });
    const result = (await enveloped.execute({
      schema: enveloped.schema,
      document,
      variableValues: { id, after, first },
      contextValue: await enveloped.contextFactory(),
    })) as ExecutionResult<PageData>;
    const body = JSON.stringify(result);
    const page = result.data?.session?.events;
    const size = isOver(body, opts.maxResponseBytes);
    if (result.errors?.length || !page || size.over) {
      if (size.over) return reply(res, 500, responseTooLarge(size.bytes, opts.maxResponseBytes), cors);
      if (!result.errors?.length) return replyError(res, 404, 'SESSION_NOT_FOUND', `session ${id} not found`, cors);
      const code = String(result.errors[0].extensions?.code ?? '');
      return reply(res, STATUS_OF[code] ?? 500, result, cors);
    }
    const final = page.edges.length === first && page.pageInfo.hasNextPage;
    res
      .writeHead(200, {
        ...(final ? cached : { ...cors, 'cache-control': 'no-store' }),
        'content-type': 'application/json; charset=utf-8',
        'content-length': String(Buffer.byteLength(body)),
      })
      .end(req.method === 'HEAD' ? undefined : body);
  };
}
