import type { ModelAnswer, ModelRequest } from '../../core/chat.ts';
import type { SettingsSchema } from './settings.ts';

export interface CompleteOptions {
  signal: AbortSignal;
  /** Text as it streams; the complete answer is returned at the end. */
  onDelta: (text: string) => void;
}

/** A chat model: one round trip per agent step. */
export interface ChatModel {
  /** The settings a session may give it (settings.ts); unset: none. */
  readonly settings?: SettingsSchema;
  complete(request: ModelRequest, opts: CompleteOptions): Promise<ModelAnswer>;
}

/** The model could not answer (bad configuration, provider error): the turn fails. */
export class ModelError extends Error {
  name = 'ModelError';
}
