// A model request's context budget: the model's context window in
// tokens — the session's `contextTokens` when it names one, else the known
// window of a known model (models/model-catalog.ts), else the host's default — and an estimate of
// a request's tokens without a tokenizer: what the provider reported for the
// last step, plus the text added since at about four characters a token.
import type { ChatMessage, ToolDefinition } from '../core/chat.ts';
import { SHIPPED_MODELS, UNKNOWN_MODEL_CONTEXT_TOKENS, type ModelCatalog } from './models/model-catalog.ts';

/** The scripted model's window unless FORKLINE_CONTEXT_TOKENS names one. */
export const SCRIPTED_CONTEXT_TOKENS = 128_000;
/** The window assumed for an unknown model without `contextTokens` (FORKLINE_CONTEXT_TOKENS overrides it). */
export const DEFAULT_CONTEXT_TOKENS = UNKNOWN_MODEL_CONTEXT_TOKENS;
/** The fraction of the window a request may fill before it is compacted first (FORKLINE_COMPACT_AT). */
export const DEFAULT_COMPACT_AT = 0.8;
/** Characters per token in the estimate (English text and JSON average about four). */
export const CHARS_PER_TOKEN = 4;
/** Tokens a message costs beyond its text (role, separators), as chat formats count it. */
const PER_MESSAGE_TOKENS = 4;

export interface BudgetOptions {
  /** The window of a model with no known window and no `contextTokens`. */
  defaultContextTokens?: number;
  /** The known models' windows (shipped, and the operator's FORKLINE_MODELS_CONFIG). */
  models?: ModelCatalog;
  /** Compact before a step whose request would exceed this fraction of the window (0 < f ≤ 1). */
  compactAt?: number;
}

/** The context window of a session's model, in tokens. */
export function contextWindowOf(config: { provider: string; model: string; contextTokens?: number }, opts: BudgetOptions = {}): number {
  if (config.contextTokens) return config.contextTokens;
  // The keyless scripted model has no real window: the host's default, else as roomy as the common models'.
  if (config.provider === 'scripted') return opts.defaultContextTokens ?? SCRIPTED_CONTEXT_TOKENS;
  return (opts.models ?? SHIPPED_MODELS).facts(config.model)?.contextTokens ?? opts.defaultContextTokens ?? DEFAULT_CONTEXT_TOKENS;
}

/** The tokens a request may hold before it is compacted first. */
export function compactionThreshold(window: number, opts: BudgetOptions = {}): number {
  const f = opts.compactAt ?? DEFAULT_COMPACT_AT;
  return Math.floor(window * (f > 0 && f <= 1 ? f : DEFAULT_COMPACT_AT));
}

/** Characters of a message as a model reads them (text, tool calls' names and arguments). */
export function messageChars(m: ChatMessage): number {
  let n = m.content?.length ?? 0;
  if (m.role === 'assistant' && m.tool_calls) for (const c of m.tool_calls) n += c.function.name.length + c.function.arguments.length + c.id.length;
  if (m.role === 'tool') n += m.tool_call_id.length;
  return n;
}

export const tokensOfChars = (chars: number) => Math.ceil(chars / CHARS_PER_TOKEN);

/** Characters through a message, at the index it had when counted (running totals: see prefixChars). */
const charsThrough = new WeakMap<ChatMessage, { index: number; chars: number }>();

/**
 * Characters of `messages`, in time proportional to what is new since an
 * earlier request of the same conversation: its messages are shared objects
 * across requests (core/model-request.ts), so the running total kept with the
 * last one already counted at the same index serves as the prefix (a step on
 * a 200,000-event session must not count every message again).
 */
function prefixChars(messages: readonly ChatMessage[]): number {
  let from = messages.length - 1;
  let chars = 0;
  for (; from >= 0; from--) {
    const t = charsThrough.get(messages[from]);
    if (t?.index === from) {
      chars = t.chars;
      break;
    }
  }
  for (let i = from + 1; i < messages.length; i++) chars += messageChars(messages[i]);
  // Kept with the last message only: the next request of the conversation starts with it (one entry, not one per message of a cold start's history).
  if (messages.length > from + 1) charsThrough.set(messages[messages.length - 1], { index: messages.length - 1, chars });
  return chars;
}

/** Tokens of messages by the character estimate. */
export function estimateMessagesTokens(messages: readonly ChatMessage[]): number {
  return tokensOfChars(prefixChars(messages)) + PER_MESSAGE_TOKENS * messages.length;
}

/** Tokens of messages not (yet) in a conversation, counted directly. */
function extraTokens(extra: readonly ChatMessage[]): number {
  let chars = 0;
  for (const m of extra) chars += messageChars(m);
  return tokensOfChars(chars) + PER_MESSAGE_TOKENS * extra.length;
}

const toolChars = new WeakMap<ToolDefinition, number>();

/** Tokens of the tool definitions a request offers (their JSON Schemas are sent too). */
export function estimateToolsTokens(tools: readonly ToolDefinition[]): number {
  let chars = 0;
  for (const t of tools) {
    let n = toolChars.get(t);
    if (n === undefined) toolChars.set(t, (n = t.name.length + t.description.length + JSON.stringify(t.parameters).length));
    chars += n;
  }
  return tokensOfChars(chars);
}

/**
 * What the provider reported for the last model call whose request is still
 * the start of the current one (no replacement since): its input and output
 * tokens, and how many of the current request's messages it covered.
 */
export interface UsageMark {
  tokens: number;
  messageCount: number;
}

/**
 * A request's tokens: the provider's count for the last step plus the
 * messages added since at the character rate, when the provider reported
 * one; else the character estimate of the whole request; never less than the character
 * estimate (a provider that counts low, or the scripted model's words).
 */
export function estimateRequestTokens(
  messages: readonly ChatMessage[],
  tools: readonly ToolDefinition[],
  mark?: UsageMark,
  /** Messages the request adds after the conversation's (the input a turn is about to take). */
  extra: readonly ChatMessage[] = [],
): number {
  const added = extraTokens(extra);
  const byChars = estimateMessagesTokens(messages) + estimateToolsTokens(tools) + added;
  if (mark && mark.messageCount <= messages.length) {
    return Math.max(byChars, mark.tokens + extraTokens(messages.slice(mark.messageCount)) + added);
  }
  return byChars;
}
