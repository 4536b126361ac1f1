// The model a session names (ModelRequest.model: its last session/model), as
// the adapters resolve it to a model of the runner's own (docs/runners.md).
import type { ModelRequest } from './runner.ts';

export interface RequestedModel {
  provider: string;
  model: string;
  /** The settings forkline recorded with it (temperature, maxOutputTokens, …). */
  settings?: Record<string, unknown>;
}

/** The model the request names, or undefined when the session names none. */
export function requestedModel(request: ModelRequest): RequestedModel | undefined {
  const m = request.model as Partial<RequestedModel> | null;
  return m && typeof m.provider === 'string' && typeof m.model === 'string'
    ? { provider: m.provider, model: m.model, ...(m.settings ? { settings: m.settings } : {}) }
    : undefined;
}

/** Why the runner cannot serve a request: the turn fails with this (never runs on another model than the one the session names). */
export function unservableModel(requested: RequestedModel | undefined, hasResolver: boolean): string {
  if (!requested) return 'this runner has no model for a session that names none (give the adapter `model`)';
  return hasResolver
    ? `this runner cannot serve model "${requested.model}" of provider "${requested.provider}" (its resolveModel gave none)`
    : `the session names model "${requested.model}" of provider "${requested.provider}", and this runner has no resolveModel to serve it`;
}
