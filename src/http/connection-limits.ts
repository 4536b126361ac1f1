// What one tenant may hold open in a process: its connections
// (graphql-ws sockets, SSE streams and AG-UI runs) and its subscriptions
// (graphql-ws subscriptions, and one per SSE stream or AG-UI run). Counted where the transport knows
// for certain when they end: a socket's close, a graphql-ws subscription's
// completion, an HTTP subscription's response closing (also one yoga answers
// 406 without reading it). Tenants come from authenticated principals only,
// and an entry leaves the table when its counts reach 0.
import type http from 'node:http';
import type { WebSocket } from 'ws';
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Refusal } from './http-body.ts';

export interface ConnectionCaps {
  /** Open graphql-ws sockets plus SSE streams (AG-UI runs among them), per tenant. */
  connections: number;
  /** Active subscriptions (graphql-ws and SSE), per tenant. */
  subscriptions: number;
}

/** graphql-ws close code of a socket refused at `connection_init` (a cap, a rate): HTTP's 429, which graphql-ws clients do not retry. */
export const TOO_MANY_REQUESTS_CLOSE_CODE = 4429;

type Kind = keyof ConnectionCaps;
const CODES: Record<Kind, string> = { connections: 'TOO_MANY_CONNECTIONS', subscriptions: 'TOO_MANY_SUBSCRIPTIONS' };
const WHAT: Record<Kind, string> = { connections: 'open WebSocket connections and SSE streams', subscriptions: 'active subscriptions' };

export class TenantConnections {
  private readonly held = new Map<string, Record<Kind, number>>();
  /** Per socket: its tenant and its subscriptions' ids. */
  private readonly sockets = new WeakMap<WebSocket, { tenant: string; subscriptions: Set<string> }>();

  constructor(readonly caps: ConnectionCaps) {}

  /** What `tenant` holds now (tests, metrics). */
  heldBy(tenant: string): Record<Kind, number> {
    return { ...(this.held.get(tenant) ?? { connections: 0, subscriptions: 0 }) };
  }

  /** A graphql-ws socket of `tenant`, at `connection_init`; released (with its subscriptions) when it closes. */
  openSocket(socket: WebSocket, tenant: string): Refusal | undefined {
    const refused = this.take(tenant, 'connections');
    if (refused) return refused;
    const entry = { tenant, subscriptions: new Set<string>() };
    this.sockets.set(socket, entry);
    socket.once('close', () => {
      for (let n = entry.subscriptions.size; n > 0; n--) this.give(tenant, 'subscriptions');
      entry.subscriptions.clear();
      this.give(tenant, 'connections');
    });
    return undefined;
  }

  /** Subscription `id` on an open socket; `endSubscription` (graphql-ws onComplete) or the socket's close releases it. */
  startSubscription(socket: WebSocket, id: string): Refusal | undefined {
    const entry = this.sockets.get(socket);
    if (!entry || entry.subscriptions.has(id)) return undefined;
    const refused = this.take(entry.tenant, 'subscriptions');
    if (!refused) entry.subscriptions.add(id);
    return refused;
  }

  endSubscription(socket: WebSocket, id: string): void {
    const entry = this.sockets.get(socket);
    if (entry?.subscriptions.delete(id)) this.give(entry.tenant, 'subscriptions');
  }

  /** A subscription over HTTP (an SSE stream, an AG-UI run) of `tenant`: a connection and a subscription until its response closes. */
  openStream(res: http.ServerResponse, tenant: string): Refusal | undefined {
    const refused = this.take(tenant, 'connections') ?? this.take(tenant, 'subscriptions', () => this.give(tenant, 'connections'));
    if (refused) return refused;
    res.once('close', () => {
      this.give(tenant, 'subscriptions');
      this.give(tenant, 'connections');
    });
    return undefined;
  }

  private take(tenant: string, kind: Kind, undo?: () => void): Refusal | undefined {
    let h = this.held.get(tenant);
    if (!h) this.held.set(tenant, (h = { connections: 0, subscriptions: 0 }));
    if (h[kind] < this.caps[kind]) {
      h[kind]++;
      return undefined;
    }
    undo?.();
    if (!h.connections && !h.subscriptions) this.held.delete(tenant);
    return { status: 429, code: CODES[kind], message: `this tenant has ${this.caps[kind]} ${WHAT[kind]}, its limit; close some first`, headers: {} };
  }

  private give(tenant: string, kind: Kind) {
    const h = this.held.get(tenant);
    if (!h) return;
    h[kind]--;
    if (!h.connections && !h.subscriptions) this.held.delete(tenant);
  }
}

/**
 * yoga's side: every subscription it runs over HTTP. Refused with the cap's
 * status (yoga answers with it, as it does SERVICE_UNAVAILABLE's 503).
 * graphql-ws subscriptions (Context.ws) are counted by the WebSocket front.
 */
export function useHttpSubscriptionLimits(held: TenantConnections): Plugin {
  return {
    onSubscribe({ args }) {
      // The fields of graphql/context.ts's Context read here (the guard sits below the schema's room).
      const ctx = args.contextValue as { ws?: unknown; res?: http.ServerResponse; scope?: { tenant: string } };
      if (ctx.ws || !ctx.res || !ctx.scope) return;
      const refused = held.openStream(ctx.res, ctx.scope.tenant);
      if (refused) throw new GraphQLError(refused.message, { extensions: { code: refused.code, http: { status: refused.status } } });
    },
  };
}
