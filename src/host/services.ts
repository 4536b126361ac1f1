import type { ModelOffer } from '../agent/models/registry.ts';
import type { SessionStore } from '../store/session-store.ts';
import type { SessionController } from './controller.ts';
import type { SessionHost } from './session-host.ts';
import type { LiveEvents } from './live/live-events.ts';
import type { ToolCatalog } from '../agent/tool-catalog.ts';
import type { ApiTokens } from './api-tokens.ts';
import type { RunnerProtocol } from './runner-protocol.ts';

/** What the GraphQL layer may call. */
export interface Services {
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
