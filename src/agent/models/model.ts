// The agent's one model interface: a step's request in, the complete answer
// out, text streamed as it comes. Every provider, the scripted model included,
// is an AI SDK language model behind it (language-model.ts).
import type { ModelAnswer, ModelRequest } from '../../core/chat.ts';

export interface CompleteOptions {
  signal: AbortSignal;
  /** Text as it streams; the complete answer is returned at the end. */
  onDelta: (text: string) => void;
}

/** A chat model: one round trip per agent step. */
export interface ChatModel {
  complete(request: ModelRequest, opts: CompleteOptions): Promise<ModelAnswer>;
}

/** The model could not answer (bad configuration, provider error): the turn fails with this message. */
export class ModelError extends Error {
  name = 'ModelError';
}
