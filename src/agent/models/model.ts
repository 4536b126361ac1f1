// The agent's one model interface: a step's request in, the complete answer
// out, text streamed as it comes. Every provider, the scripted model included,
// is an AI SDK language model behind it (language-model.ts).
import type { ModelAnswer, ModelRequest } from '../../core/chat.ts';

export interface CompleteOptions {
  signal: AbortSignal;
  /** Text as it streams; the complete answer is returned at the end. */
  onDelta: (text: string) => void;
  /** Told of an attempt that failed and will be tried again (after `delayMs`); awaited before the wait. */
  onRetry?: (attempt: FailedAttempt) => void | Promise<void>;
}

/** A model call's attempt that failed for a reason that may pass (a 429, a 5xx, a timeout, a lost connection). */
export interface FailedAttempt {
  /** 1 for the first attempt. */
  attempt: number;
  /** The provider's HTTP status, when it answered. */
  status?: number;
  /** What the turn would have failed with. */
  error: string;
  /** The wait before the next attempt (the provider's retry-after when it named one). */
  delayMs: number;
}

/** How a model call is tried again (FORKLINE_MODEL_MAX_RETRIES; docs/agents.md "Retries"). */
export interface ModelRetryPolicy {
  /** Attempts after the first (0: none). */
  maxRetries: number;
  /** The first wait, doubling up to `maxDelayMs` (core/backoff.ts). */
  initialDelayMs: number;
  maxDelayMs: number;
}

/** Two retries (three attempts), waits of 1 s then 2 s unless the provider names its own (up to a minute). */
export const DEFAULT_MODEL_RETRIES: ModelRetryPolicy = { maxRetries: 2, initialDelayMs: 1000, maxDelayMs: 30_000 };

/** A provider's retry-after longer than this is not waited for: the backoff's own wait is used. */
export const MAX_RETRY_AFTER_MS = 60_000;

/** A chat model: one round trip per agent step. */
export interface ChatModel {
  complete(request: ModelRequest, opts: CompleteOptions): Promise<ModelAnswer>;
}

/** The model could not answer (bad configuration, provider error): the turn fails with this message. */
export class ModelError extends Error {
  name = 'ModelError';
}

/** The provider refused the request as longer than the model's context window (its own error: language-model.ts contextOverflow). */
export class ContextOverflowError extends ModelError {
  name = 'ContextOverflowError';
}
