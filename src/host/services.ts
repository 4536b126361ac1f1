import type { ModelOffer } from '../agent/models/registry.ts';
import type { SessionStore, Scope, TenantStore } from '../store/session-store.ts';
import type { SessionController } from './controller.ts';
import type { SessionHost } from './session-host.ts';
import type { LiveEvents } from './live/live-events.ts';
import type { ToolCatalog } from '../agent/tool-catalog.ts';
import type { ApiTokens } from './api-tokens.ts';
import type { RunnerProtocol } from './runner-protocol.ts';

/** The store as the doors get it: a tenant's view per caller (store/tenant-store.ts), never the store itself. */
export interface TenantStores {
  forTenant(scope: Scope): TenantStore;
}

/** What the GraphQL schema and the HTTP doors may call: the services, the store only as tenants' views. */
export type DoorServices = Omit<Services, 'store'> & { store: TenantStores };

/** The host's services (the composition root and tests hold these; the doors get DoorServices). */
export interface Services {
  /** The system's store: every tenant's sessions. */
  store: SessionStore;
  controller: SessionController;
  host: SessionHost;
  /** Subscriptions: live events, turn updates, changed sessions. */
  live: LiveEvents;
  /** The `tools` query and Session.tools: built-ins and MCP servers' tools. */
  tools: ToolCatalog;
  /** The `models` query: providers the host knows and the model new sessions get. */
  models: { offers(): ModelOffer[]; defaultModel: { provider: string; model: string } };
  /** Stored API tokens: the admin's use cases and the verified tokens requests are checked against. */
  apiTokens: ApiTokens;
  /** External runners: their leases, appends, model requests and runnable sessions. */
  runners: RunnerProtocol;
}
