import type { PrismaClient } from '@prisma/client';
import type { SessionStore, Scope } from '../store/session-store.ts';
import type { Caller } from '../core/api-tokens.ts';
import type { Services } from '../host/services.ts';
import type { SessionLoader } from './session-loader.ts';

/** Per-request context: who is asking and the services resolvers map onto. */
export interface Context {
  scope: Scope;
  /** The caller's tenant and scopes (plugins/scopes.ts, the token admin's fields). */
  caller: Caller;
  prisma: PrismaClient;
  store: SessionStore;
  services: Services;
  /** Sessions by id, batched per request. */
  sessionLoader: SessionLoader;
  /**
   * Set by the GraphQL door (http/graphql/graphql-handler.ts) on an operation
   * that arrived over graphql-ws, with what the door needs to deliver it; the
   * rest is the door's own. Plugins only ask whether it is there: a WebSocket
   * operation's result and connection are the WebSocket front's to measure.
   */
  ws?: { readonly id: string };
}
