import type { Scope, TenantStore } from '../store/session-store.ts';
import type { Caller } from '../core/api-tokens.ts';
import type { DoorServices } from '../host/services.ts';
import type { SessionLoader } from './session-loader.ts';
import type { ClientGone, StatementScope } from '../db/statement-deadlines.ts';
import type { BoundedText, TextBudget } from '../core/text-budget.ts';

/**
 * A request's texts (request-texts.ts): its budget for them and those read, by the object whose fields show them and
 * the text they show; for the execution of `root` (each payload of a subscription is an execution of its own).
 */
export interface RequestTexts {
  readonly root: unknown;
  readonly budget: TextBudget;
  readonly read: Map<object, Map<string, Promise<BoundedText | null>>>;
}

/**
 * The model requests one execution has read (model-requests.ts): one at a time, each (a session at a length) once,
 * and the bytes of those built, held to the response limit.
 */
export interface ModelRequestReads {
  readonly root: unknown;
  /** The last read: the next one starts once it has ended. */
  tail: Promise<unknown>;
  /** The reads by session and length: the same one asked again is the same read. */
  readonly byKey: Map<string, Promise<unknown>>;
  /** Bytes of those built, as JSON. */
  bytes: number;
  built: number;
}

/** Per-request context: who is asking and the services resolvers map onto. */
export interface Context {
  scope: Scope;
  /** The caller's tenant and scopes (plugins/scopes.ts, the token admin's fields). */
  caller: Caller;
  /** The store as the caller's tenant sees it: every read is checked to be the tenant's (store/tenant-store.ts). */
  store: TenantStore;
  services: DoorServices;
  /** Sessions by id, batched per request. */
  sessionLoader: SessionLoader;
  /** The response limit (FORKLINE_MAX_RESPONSE_BYTES): a resolver that builds one large value stops there. Unset: none. */
  maxResponseBytes?: number;
  /**
   * Set by the GraphQL door (http/graphql/graphql-handler.ts) on an operation
   * that arrived over graphql-ws, with what the door needs to deliver it; the
   * rest is the door's own. Plugins only ask whether it is there: a WebSocket
   * operation's result and connection are the WebSocket front's to measure.
   */
  ws?: { readonly id: string };
  /**
   * Aborted when the operation's client has gone (its HTTP connection or WebSocket closed): its reads are cancelled,
   * and its `signal` takes an import waiting for a slot out of the queue (types/recordings.ts).
   */
  gone?: ClientGone & { readonly signal?: AbortSignal };
  /** The operation's statement scope (plugins/statement-deadlines.ts): passed to the store's reads it bounds. Unset: bounds off, or a mutation. */
  statements?: StatementScope;
  /** The store as the operation's scoped reads see it (scoped-reads.ts): made the first time a resolver asks. */
  reads?: TenantStore;
  /** The texts the request has read and its budget for them (request-texts.ts): made the first time a text is read. */
  texts?: RequestTexts;
  /** The model requests the request has read (model-requests.ts): made the first time one is read. */
  modelRequests?: ModelRequestReads;
}
