// The model-facing shapes, in OpenAI chat-completions format (docs/contract.md#agent-loop).
import type { ResponseFormat, ToolCall } from './events.ts';
import type { FileScope, ToolEffect } from './tools.ts';

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | {
      role: 'assistant';
      content: string | null;
      tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
    }
  | { role: 'tool'; tool_call_id: string; content: string };

/** How a tool message says its call failed (a tool/result with status `error`): the model adapter reads it back. */
export const TOOL_ERROR_PREFIX = 'Error: ';

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
  effect: ToolEffect;
  /** It works in the session's file workspace (its file changes are recorded with its result): only there, or also outside it. */
  files?: FileScope;
}

export interface ModelRequest {
  provider: string;
  model: string;
  settings?: Record<string, unknown>;
  messages: ChatMessage[];
  tools: ToolDefinition[];
  /** The JSON Schema the turn's input asks the answer to match (structured output): sent as the provider's response format. */
  responseFormat?: ResponseFormat;
}

/**
 * A call of a model's answer, under the name of the tool it names. `unoffered`: the name the model wrote is
 * no offered tool's (by the name each went by on the wire, core/wire-names.ts): it stays as written and never runs.
 */
export type AnsweredCall = ToolCall & { unoffered?: true };

/** The model's complete answer for one step (persisted as model/message). */
export interface ModelAnswer {
  text: string;
  toolCalls: AnsweredCall[];
  /** Tokens the provider counted, when it says (stored on model/message, traced). */
  usage?: { inputTokens?: number; outputTokens?: number };
}
