// The adapter from the agent's model interface (model.ts) to an AI SDK
// language model (LanguageModelV3): the conversation converted (prompt.ts), the
// session's allowed settings as call options (settings.ts), one streamed call;
// text deltas as they come, tool calls with their arguments as the model wrote
// them, usage as the provider reported it. Whatever the model or its provider
// fails with becomes a ModelError naming the provider (the turn fails with it).
import { setTimeout as sleep } from 'node:timers/promises';
import {
  APICallError,
  type LanguageModelV3,
  type LanguageModelV3FinishReason,
  type LanguageModelV3FunctionTool,
  type LanguageModelV3StreamPart,
} from '@ai-sdk/provider';
import { backoffDelay, retryAfterMs } from '../../core/backoff.ts';
import type { AnsweredCall, ModelAnswer, ModelRequest, ToolDefinition } from '../../core/chat.ts';
import { MAX_REPORTED_TOKENS } from '../../core/events.ts';
import { withoutSecrets } from '../../core/secrets.ts';
import { WireToolNames } from '../../core/wire-names.ts';
import {
  ContextOverflowError,
  DEFAULT_MODEL_RETRIES,
  MAX_RETRY_AFTER_MS,
  ModelError,
  type ChatModel,
  type CompleteOptions,
  type ModelRetryPolicy,
} from './model.ts';
import { toPrompt, toTools, type PromptOptions } from './prompt.ts';
import { DEFAULT_PROVIDER_LIMITS, ProviderLimitError } from './provider-fetch.ts';
import { callSettings, MAX_OUTPUT_TOKENS } from './settings.ts';

export interface LanguageChatModelOptions {
  /** The session's provider name, in error messages. */
  provider: string;
  /** The language model for a model name (providers create one per name; cheap). */
  languageModel(modelId: string): LanguageModelV3;
  prompt?: PromptOptions;
  /** Told of each request before it is sent (the registry keeps the scripted model's for tests). */
  onRequest?(request: ModelRequest): void;
  /** How a failed call is tried again (default DEFAULT_MODEL_RETRIES). */
  retries?: ModelRetryPolicy;
  now?(): number;
  /** The most tool calls one answer may make (FORKLINE_MODEL_MAX_TOOL_CALLS); unset: DEFAULT_PROVIDER_LIMITS.maxToolCalls. */
  maxToolCalls?: number;
  /** The keys the provider's requests carry (providers.ts): cut out of what its errors say. */
  keys?: readonly string[];
}

export class LanguageChatModel implements ChatModel {
  private readonly maxToolCalls: number;

  constructor(private readonly opts: LanguageChatModelOptions) {
    this.maxToolCalls = opts.maxToolCalls ?? DEFAULT_PROVIDER_LIMITS.maxToolCalls;
  }

  /**
   * One model call, tried again while it fails for a reason that may pass and
   * nothing of its answer has streamed yet (text the user saw is never sent
   * twice); a cancel (the signal) stops the waiting too.
   */
  async complete(request: ModelRequest, opts: CompleteOptions): Promise<ModelAnswer> {
    this.opts.onRequest?.(request);
    const policy = this.opts.retries ?? DEFAULT_MODEL_RETRIES;
    for (let attempt = 1; ; attempt++) {
      const started = { streamed: false };
      try {
        return await this.attempt(request, opts, started);
      } catch (err) {
        if (opts.signal.aborted || attempt > policy.maxRetries || started.streamed || !retryable(err)) throw err;
        const cause = (err as ModelError).cause;
        const headers = APICallError.isInstance(cause) ? cause.responseHeaders : undefined;
        const asked = retryAfterMs(headers, this.opts.now?.() ?? Date.now());
        const delayMs =
          asked !== undefined && asked <= MAX_RETRY_AFTER_MS
            ? asked
            : backoffDelay(attempt - 1, { initialMs: policy.initialDelayMs, maxMs: policy.maxDelayMs });
        const status = APICallError.isInstance(cause) ? cause.statusCode : undefined;
        await opts.onRetry?.({ attempt, error: (err as Error).message, delayMs, ...(status ? { status } : {}) });
        await sleep(delayMs, undefined, { signal: opts.signal });
      }
    }
  }

  private async attempt(request: ModelRequest, { signal, onDelta }: CompleteOptions, started: { streamed: boolean }): Promise<ModelAnswer> {
    let text = '';
    let answerChars = 0; // text and call arguments: what the step's model/message will hold
    let usage: ModelAnswer['usage'];
    let finished = false;
    const toolCalls: AnsweredCall[] = [];
    // Calls and blocks the provider has begun: the SDK keeps each begun one until the answer ends and some of its parsers look
    // through all of them at every event, so they are bounded as they begin, not only as they finish (Memory and time).
    let begunCalls = 0;
    let begunBlocks = 0;
    let reader: ReadableStreamDefaultReader<LanguageModelV3StreamPart> | undefined;
    try {
      // Offered under wire names (core/wire-names.ts), one tool to a name; the answer's calls name the tools again.
      const { names, tools } = wireToolsOf(request.tools);
      const { stream } = await this.opts.languageModel(request.model).doStream({
        prompt: toPrompt(request.messages, this.opts.prompt),
        ...(tools.length ? { tools, toolChoice: { type: 'auto' } } : {}),
        // Structured output as each provider's API takes it (the AI SDK maps it): OpenAI's response_format / text.format,
        // Anthropic's output format (or its JSON tool on older models), Google's responseSchema.
        ...(request.responseFormat
          ? { responseFormat: { type: 'json' as const, schema: request.responseFormat.schema, name: request.responseFormat.name } }
          : {}),
        ...callSettings(request.settings),
        abortSignal: signal,
      });
      reader = stream.getReader();
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        const part: LanguageModelV3StreamPart = r.value;
        switch (part.type) {
          case 'text-delta':
            if (!part.delta) break;
            answerChars += part.delta.length;
            if (answerChars > MAX_ANSWER_CHARS) throw answerTooLong();
            started.streamed = true;
            text += part.delta;
            onDelta(part.delta);
            break;
          case 'text-start':
          case 'reasoning-start':
            if (++begunBlocks > MAX_ANSWER_BLOCKS) throw tooManyBlocks();
            break;
          case 'tool-input-start':
            // A call the provider runs itself is a block of its answer; the others count toward the calls bound.
            if (part.providerExecuted) {
              if (++begunBlocks > MAX_ANSWER_BLOCKS) throw tooManyBlocks();
            } else if (++begunCalls > this.maxToolCalls) throw tooManyCalls(this.maxToolCalls);
            break;
          case 'tool-call':
            // Run by the provider (its own built-in tools): nothing for the agent to run.
            started.streamed = true;
            answerChars += part.input.length;
            if (answerChars > MAX_ANSWER_CHARS) throw answerTooLong();
            if (part.providerExecuted) break;
            // Every call becomes part of the step's event and a tool run: past the bound, the answer is given up, none of it run.
            if (toolCalls.length >= this.maxToolCalls) throw tooManyCalls(this.maxToolCalls);
            toolCalls.push(answeredCall(names, part.toolCallId, part.toolName, part.input || '{}'));
            break;
          case 'finish':
            usage = usageOf(part.usage);
            finished = saidWhyItEnded(part.finishReason);
            break;
          case 'error':
            throw part.error;
        }
      }
      // A stream that ends before the provider said its answer did (a connection cut between events) is as a connection
      // lost mid-answer: the answer is not whole, so none of its calls runs and the turn fails (docs/agents.md#models).
      if (!finished) throw unfinished(this.opts.provider);
    } catch (err) {
      // A stream left unread would keep its connection: cancelling it closes the response.
      reader?.cancel(err).catch(() => {});
      if (signal.aborted) throw err;
      throw modelError(this.opts.provider, err, this.opts.keys);
    }
    return usage ? { text, toolCalls, usage } : { text, toolCalls };
  }
}

/**
 * A request's tools under their wire names (one tool to a name) and as the SDK's tools, kept by the request's tools
 * array: the agent sends the same one at every step while the session's offering stays the same (session-runner.ts).
 */
const wireTools = new WeakMap<readonly ToolDefinition[], { names: WireToolNames; tools: LanguageModelV3FunctionTool[] }>();

function wireToolsOf(definitions: readonly ToolDefinition[]): { names: WireToolNames; tools: LanguageModelV3FunctionTool[] } {
  let kept = wireTools.get(definitions);
  if (!kept) {
    const names = new WireToolNames(definitions.map((t) => t.name));
    kept = { names, tools: toTools(definitions.filter((t) => names.offers(t.name))) };
    wireTools.set(definitions, kept);
  }
  return kept;
}

/** An answer's call under the name of the tool it names; a name no offered tool went by stays as written, marked: it never runs. */
function answeredCall(names: WireToolNames, id: string, wireName: string, args: string): AnsweredCall {
  const tool = names.toolOf(wireName);
  return tool === undefined ? { id, name: wireName, arguments: args, unoffered: true } : { id, name: tool, arguments: args };
}

/**
 * The most characters of text and call arguments one answer may hold (8 times the longest answer a session may ask
 * for, settings.ts MAX_OUTPUT_TOKENS, at four characters a token): the step's model/message, kept even when the call
 * fails, stays a size the log, its readers and the fold carry easily, whatever the response's byte limit lets through.
 */
export const MAX_ANSWER_CHARS = 8 * 4 * MAX_OUTPUT_TOKENS;

/**
 * The most blocks (text, reasoning, calls the provider runs itself) one answer may begin: a few are what models send (a
 * reasoning summary's parts, the text between calls); thousands only make the SDK's parsers look through them all at every event.
 */
const MAX_ANSWER_BLOCKS = 1024;

const tooManyBlocks = () =>
  new ProviderLimitError(`the answer began more than ${MAX_ANSWER_BLOCKS} blocks (text, reasoning, the provider's own tool calls) and was given up`);

const tooManyCalls = (max: number) => new ProviderLimitError(`the answer made more than ${max} tool calls (FORKLINE_MODEL_MAX_TOOL_CALLS) and was given up`);

const answerTooLong = () => new ProviderLimitError(`the answer passed ${MAX_ANSWER_CHARS} characters of text and call arguments and was cut off`);

/**
 * Whether the provider said why its answer ended. Each SDK reads a finish reason from the provider's last event
 * (OpenAI chat's `finish_reason`, Responses' `response.completed`, Anthropic's `stop_reason`, Gemini's `finishReason`)
 * and reports `other` with no raw reason when none came: the stream ended before the answer did.
 */
function saidWhyItEnded(reason: LanguageModelV3FinishReason): boolean {
  return !(reason.unified === 'other' && reason.raw === undefined);
}

const unfinished = (provider: string) =>
  new ModelError(`${provider} provider: the response ended before the answer did (no finish reason came): the answer is incomplete`);

/** Token counts as the provider reported them; absent ones, and ones no answer can have (negative, fractional, past MAX_REPORTED_TOKENS), left out. */
function usageOf(u: { inputTokens: { total: number | undefined }; outputTokens: { total: number | undefined } }): ModelAnswer['usage'] {
  const counted = (n: number | undefined) => (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= MAX_REPORTED_TOKENS ? n : undefined);
  const inputTokens = counted(u.inputTokens.total);
  const outputTokens = counted(u.outputTokens.total);
  if (inputTokens === undefined && outputTokens === undefined) return undefined;
  return { ...(inputTokens !== undefined ? { inputTokens } : {}), ...(outputTokens !== undefined ? { outputTokens } : {}) };
}

/**
 * The providers' own answers to a request longer than the model's window:
 * OpenAI chat and Responses (`code: "context_length_exceeded"`, "maximum
 * context length"), Anthropic ("prompt is too long"), Google ("The input token
 * count (…) exceeds the maximum number of tokens allowed"), and the
 * OpenAI-compatible servers that copy OpenAI's wording.
 */
const OVERFLOW: ReadonlyArray<readonly string[]> = [
  ['context_length_exceeded'],
  ['maximum context length'],
  ['prompt is too long'],
  ['input token count', 'exceeds the maximum'],
  ['exceeds the context window'],
];

/**
 * Whether a line of `text` (lower case) holds each of `words` in order. Searched, not matched with a regular
 * expression: /input token count.*exceeds the maximum/ rescanned the rest of the line from each occurrence of its
 * first words, and a 64 KiB error body of them held the event loop for about a second per test
 * (docs/operations.md "Memory and time").
 */
function saysInOrder(text: string, words: readonly string[]): boolean {
  return text.split('\n').some((line) => {
    let at = 0;
    for (const word of words) {
      const found = line.indexOf(word, at);
      if (found < 0) return false;
      at = found + word.length;
    }
    return true;
  });
}

export function contextOverflow(err: APICallError): boolean {
  if (err.statusCode !== 400 && err.statusCode !== 413) return false;
  const texts = [err.message, ...(typeof err.responseBody === 'string' ? [err.responseBody] : [])].map((t) => t.toLowerCase());
  return OVERFLOW.some((words) => texts.some((t) => saysInOrder(t, words)));
}

function limitBroken(err: unknown): ProviderLimitError | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) if (e instanceof ProviderLimitError) return e;
  return undefined;
}

/** Whether a failed call may succeed if sent again: the SDK's judgement of the provider's answer (408, 409, 429, 5xx, no connection). */
function retryable(err: unknown): boolean {
  const cause = err instanceof ModelError ? err.cause : err;
  return APICallError.isInstance(cause) && cause.isRetryable;
}

/**
 * What a turn's `plugin/agent/error` (and `plugin/agent/retry`) says: the provider, the HTTP status when there was one,
 * the provider's own message, less any of `keys` (core/secrets.ts: a server may repeat the key it was sent).
 */
export function modelError(provider: string, err: unknown, keys: readonly string[] = []): ModelError {
  const said = (text: string) => withoutSecrets(text, keys).slice(0, 2000);
  // A limit the bounded fetch enforced reaches here as itself or as the cause the SDK wrapped it in.
  const limit = limitBroken(err);
  if (limit) return new ProviderLimitError(`${provider} provider: ${limit.message}`, { cause: err });
  if (err instanceof ModelError) return err;
  if (APICallError.isInstance(err)) {
    const status = err.statusCode ? `HTTP ${err.statusCode}: ` : '';
    const Kind = contextOverflow(err) ? ContextOverflowError : ModelError;
    return new Kind(said(`${provider} provider: ${status}${err.message}`), { cause: err });
  }
  const message =
    err instanceof Error
      ? err.message
      : typeof err === 'object' && err !== null && typeof (err as { message?: unknown }).message === 'string'
        ? (err as { message: string }).message
        : JSON.stringify(err);
  return new ModelError(said(`${provider} provider: ${message}`), { cause: err });
}
