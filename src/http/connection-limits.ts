// What one tenant, and one API token of it, may hold open in a process: its
// connections (graphql-ws sockets, SSE streams, AG-UI runs, /chat answers and
// recording downloads) and its subscriptions (graphql-ws subscriptions, and
// one per SSE stream, AG-UI run or /chat answer). The token's caps sit below
// the tenant's, so one leaked or runaway token (a CI bot's) cannot take every
// place of its tenant and lock its dashboards out. Counted where the transport
// knows for certain when they end: a socket's close, a graphql-ws
// subscription's completion, an HTTP response closing (also one yoga answers
// 406 without reading it). Holders come from authenticated principals only,
// and an entry leaves its table when its counts reach 0.
import type http from 'node:http';
import type { WebSocket } from 'ws';
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Principal } from './auth.ts';
import type { Refusal } from './http-body.ts';

export interface ConnectionCaps {
  /** Open graphql-ws sockets plus HTTP streams (SSE subscriptions, AG-UI runs, /chat answers, recording downloads). */
  connections: number;
  /** Active subscriptions (graphql-ws and over HTTP). */
  subscriptions: number;
}

/** Per tenant, and per API token (its digest) within it; Infinity: that cap off. */
interface StreamCaps {
  tenant: ConnectionCaps;
  token: ConnectionCaps;
}

/** graphql-ws close code of a socket refused at `connection_init` (a cap, a rate): HTTP's 429, which graphql-ws clients do not retry. */
export const TOO_MANY_REQUESTS_CLOSE_CODE = 4429;

type Kind = keyof ConnectionCaps;
type Level = keyof StreamCaps;
/** `forkline_rejected_requests_total`'s reason of each refusal: bounded, never a tenant or a token. */
type CapReason = `${Level}_${Kind}`;

const CODES: Record<Kind, string> = { connections: 'TOO_MANY_CONNECTIONS', subscriptions: 'TOO_MANY_SUBSCRIPTIONS' };
const WHAT: Record<Kind, string> = {
  connections: 'open WebSocket connections and SSE streams',
  subscriptions: 'active subscriptions',
};
const WHO: Record<Level, string> = { tenant: 'this tenant has', token: 'this API token has' };
const NONE = (): Record<Kind, number> => ({ connections: 0, subscriptions: 0 });

/** A holder of places: the tenant and the token of one principal (the token by its digest, never its bytes). */
type Holder = Record<Level, string>;
const holderOf = (p: Principal): Holder => ({ tenant: p.tenant, token: p.key });

export class TenantConnections {
  private readonly held: Record<Level, Map<string, Record<Kind, number>>> = { tenant: new Map(), token: new Map() };
  /** Per socket: its holder and its subscriptions' ids. */
  private readonly sockets = new WeakMap<WebSocket, { holder: Holder; subscriptions: Set<string> }>();

  constructor(
    readonly caps: StreamCaps,
    private readonly onRefused: (reason: CapReason) => void = () => {},
  ) {}

  /** What `tenant` holds now (tests, metrics). */
  heldBy(tenant: string): Record<Kind, number> {
    return { ...(this.held.tenant.get(tenant) ?? NONE()) };
  }

  /** What the token of `key` (Principal.key, its digest) holds now (tests). */
  heldByToken(key: string): Record<Kind, number> {
    return { ...(this.held.token.get(key) ?? NONE()) };
  }

  /** A graphql-ws socket of `principal`, at `connection_init`; released (with its subscriptions) when it closes. */
  openSocket(socket: WebSocket, principal: Principal): Refusal | undefined {
    const holder = holderOf(principal);
    const refused = this.take(holder, ['connections']);
    if (refused) return refused;
    const entry = { holder, subscriptions: new Set<string>() };
    this.sockets.set(socket, entry);
    socket.once('close', () => {
      for (let n = entry.subscriptions.size; n > 0; n--) this.give(holder, ['subscriptions']);
      entry.subscriptions.clear();
      this.give(holder, ['connections']);
    });
    return undefined;
  }

  /** Subscription `id` on an open socket; `endSubscription` (graphql-ws onComplete) or the socket's close releases it. */
  startSubscription(socket: WebSocket, id: string): Refusal | undefined {
    const entry = this.sockets.get(socket);
    if (!entry || entry.subscriptions.has(id)) return undefined;
    const refused = this.take(entry.holder, ['subscriptions']);
    if (!refused) entry.subscriptions.add(id);
    return refused;
  }

  endSubscription(socket: WebSocket, id: string): void {
    const entry = this.sockets.get(socket);
    if (entry?.subscriptions.delete(id)) this.give(entry.holder, ['subscriptions']);
  }

  /**
   * A response of `principal` held open until it closes: a connection, and a
   * subscription too unless `subscription` is false (a recording download).
   */
  openStream(res: http.ServerResponse, principal: Principal, subscription = true): Refusal | undefined {
    const holder = holderOf(principal);
    const kinds: Kind[] = subscription ? ['connections', 'subscriptions'] : ['connections'];
    const refused = this.take(holder, kinds);
    if (refused) return refused;
    res.once('close', () => this.give(holder, kinds));
    return undefined;
  }

  /** Every place of `kinds` at both levels, or none of them and the first cap in the way. */
  private take(holder: Holder, kinds: readonly Kind[]): Refusal | undefined {
    for (const level of ['tenant', 'token'] as const) {
      const h = this.held[level].get(holder[level]);
      const full = kinds.find((kind) => (h?.[kind] ?? 0) >= this.caps[level][kind]);
      if (full === undefined) continue;
      this.onRefused(`${level}_${full}`);
      const cap = this.caps[level][full];
      return { status: 429, code: CODES[full], message: `${WHO[level]} ${cap} ${WHAT[full]}, its limit; close some first`, headers: {} };
    }
    for (const level of ['tenant', 'token'] as const) {
      let h = this.held[level].get(holder[level]);
      if (!h) this.held[level].set(holder[level], (h = NONE()));
      for (const kind of kinds) h[kind]++;
    }
    return undefined;
  }

  private give(holder: Holder, kinds: readonly Kind[]) {
    for (const level of ['tenant', 'token'] as const) {
      const h = this.held[level].get(holder[level]);
      if (!h) continue;
      for (const kind of kinds) h[kind]--;
      if (!h.connections && !h.subscriptions) this.held[level].delete(holder[level]);
    }
  }
}

/**
 * What one graphql-ws socket may have in flight at once — queries, mutations
 * and subscriptions together — in every mode, with tokens or without: the
 * tenant's and the token's caps count only subscriptions, and only with
 * tokens, so in local mode one socket could start thousands. Counted by
 * operation id from graphql-ws's onSubscribe to its onComplete; an id
 * graphql-ws let go without onComplete (an operation that failed before it
 * ran) is dropped once the socket is at its cap, by graphql-ws's own record of
 * what it runs (`inFlight`).
 */
export class SocketOperations {
  private readonly ids = new WeakMap<WebSocket, Set<string>>();

  /** `cap`: operations per socket (Infinity: no cap); `onRefused`: told of each refusal (the metric). */
  constructor(
    readonly cap: number,
    private readonly onRefused: () => void = () => {},
  ) {}

  /** Operation `id` on `socket`, or its refusal when the socket already has `cap` in flight. */
  start(socket: WebSocket, id: string, inFlight: (id: string) => boolean): Refusal | undefined {
    if (this.cap === Infinity) return undefined;
    let ids = this.ids.get(socket);
    if (!ids) this.ids.set(socket, (ids = new Set()));
    if (ids.size >= this.cap) for (const held of ids) if (!inFlight(held)) ids.delete(held);
    if (ids.size >= this.cap && !ids.has(id)) {
      this.onRefused();
      const message = `this WebSocket has ${this.cap} operations in flight, its limit (FORKLINE_MAX_OPERATIONS_PER_SOCKET); complete some first`;
      return { status: 429, code: 'TOO_MANY_OPERATIONS', message, headers: {} };
    }
    ids.add(id);
    return undefined;
  }

  /** Operation `id` ended (graphql-ws onComplete), or failed before it ran. */
  end(socket: WebSocket, id: string): void {
    this.ids.get(socket)?.delete(id);
  }
}

/**
 * yoga's side: every subscription it runs over HTTP (SSE, multipart).
 * Refused with the cap's status (yoga answers with it, as it does
 * SERVICE_UNAVAILABLE's 503). graphql-ws subscriptions (Context.ws) are
 * counted by the WebSocket front. `callerOf`: the request's principal, as
 * the request gate decided it.
 */
export function useHttpSubscriptionLimits(held: TenantConnections, callerOf: (req: http.IncomingMessage) => Principal | undefined): Plugin {
  return {
    onSubscribe({ args }) {
      // The fields of graphql/context.ts's Context (and yoga's server context) read here (the guard sits below the schema's room).
      const ctx = args.contextValue as { ws?: unknown; req?: http.IncomingMessage; res?: http.ServerResponse };
      if (ctx.ws || !ctx.res || !ctx.req) return;
      const principal = callerOf(ctx.req);
      if (!principal) return;
      const refused = held.openStream(ctx.res, principal);
      if (refused) throw new GraphQLError(refused.message, { extensions: { code: refused.code, http: { status: refused.status } } });
    },
  };
}
