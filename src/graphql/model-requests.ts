// The model requests one operation reads (Session.modelRequest,
// AppendEventsPayload.modelRequest; docs/operations.md "Memory and time"). Each
// holds its session's history, up to MAX_HELD_HISTORY_CHARS, whatever the query
// selects of it, and the cost estimate prices it as one object: 100 ids of
// `nodes`, aliases or a page of sessions made as many folds at once, side by
// side (a read token took the process past its heap with `modelRequest {
// eventCount }` under 100 ids). So an operation builds them one at a time, the
// same session at the same length once, and stops at the response limit: past
// it the response is refused anyway (response-size.ts), so the requests after
// it are refused as they come instead of being built. The first is always
// built (one is bounded by the fold's own bounds), so a runner's claim of one
// session reads its request whatever its size.
import { GraphQLError, type GraphQLResolveInfo } from 'graphql';
import { RESPONSE_TOO_LARGE } from '../core/errors.ts';
import type { ModelRequest } from '../host/runner-protocol.ts';
import type { Context, ModelRequestReads } from './context.ts';
import { jsonBytes } from './plugins/response-size.ts';

/** The model requests of the execution `info` belongs to (a new one for each subscription payload). */
function readsOf(ctx: Context, info: Pick<GraphQLResolveInfo, 'rootValue'>): ModelRequestReads {
  const held = ctx.modelRequests;
  if (held && held.root === info.rootValue) return held;
  return (ctx.modelRequests = { root: info.rootValue, tail: Promise.resolve(), byKey: new Map(), bytes: 0, built: 0 });
}

const tooMany = (max: number) =>
  new GraphQLError(
    `Session.modelRequest: the model requests this operation reads come to more than ${max} bytes, the response limit (FORKLINE_MAX_RESPONSE_BYTES); ` +
      'each holds its session’s history, whatever is selected of it: read fewer per operation',
    { extensions: { code: RESPONSE_TOO_LARGE } },
  );

/** The model request `key` names (a session and the length it is read at), read by `read` within the operation's bounds. */
export function boundedModelRequest(
  ctx: Context,
  info: Pick<GraphQLResolveInfo, 'rootValue'>,
  key: string,
  read: () => Promise<ModelRequest>,
): Promise<ModelRequest> {
  const r = readsOf(ctx, info);
  const known = r.byKey.get(key);
  if (known) return known as Promise<ModelRequest>;
  const max = ctx.maxResponseBytes ?? Infinity;
  const next: Promise<ModelRequest> = r.tail.then(async () => {
    if (r.built > 0 && r.bytes > max) throw tooMany(max);
    const request = await read();
    const bytes = jsonBytes(request);
    if (r.built > 0 && r.bytes + bytes > max) throw tooMany(max);
    r.bytes += bytes;
    r.built++;
    return request;
  });
  r.tail = next.catch(() => undefined);
  r.byKey.set(key, next as Promise<unknown>);
  return next;
}
