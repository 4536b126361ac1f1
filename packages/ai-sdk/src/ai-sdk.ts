// Vercel AI SDK adapter for external runners (docs/runners.md): runs
// `streamText` (or `generateText`) with the runner's own tools on a claimed
// session, from the model request forkline builds (Session.modelRequest), with
// the model the session names (resolveModel) and the settings it recorded.
// Each step is written as it happens, through the SDK's TurnWriter: the
// model is wrapped (wrapLanguageModel) so the step's start is stored before
// the model is called and its message with the tool calls before any tool
// runs (the stream's tool calls, and their streamed input, are held back until
// then); each tool's `execute` is wrapped to store its result as soon as it returns (what its
// `toModelOutput` hands the model, and the model is handed the stored text). The tools
// are declared with their effects first (declareRunnerTools). Text deltas
// stream to sessionTurns subscribers as they come.
//
//   await runner.run((session) => runAiSdkTurns(session, { model, tools, effects: { send_email: 'side-effects' } }));
import {
  asSchema,
  generateText,
  InvalidToolInputError,
  type CallSettings,
  stepCountIs,
  streamText,
  wrapLanguageModel,
  type ModelMessage,
  type StepResult,
  type ToolSet,
} from 'ai';
import type { LanguageModelV3Content, LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import type { ChatMessage, ModelRequest, RunnerSession, RunnerToolCall, RunnerToolDeclaration, ToolEffect, TurnWriter } from '@forkline/runner';
import {
  cancelledBeforeStart,
  handedResultText,
  INCOMPLETE_ANSWER,
  parsesAsJson,
  cancelledWhileRunning,
  requestedModel,
  needsWireNames,
  RequestWireNames,
  sessionRequiresApproval,
  resumeDecidedStep,
  RunCallIds,
  summaryPrompt,
  toolResultContent,
  unservableModel,
  writeRunnerCompaction,
  type AdmittedCall,
  type RequestedModel,
  type ToolResultContent,
} from '@forkline/runner';

/**
 * A model the app's `ai` can run (and wrap): its provider packages' own (LanguageModelV3 with ai 6,
 * LanguageModelV4 or V3 with ai 7). Named through the app's `ai`, so either major type-checks.
 */
export type AiSdkModel = Parameters<typeof wrapLanguageModel>[0]['model'];

/** The streamText options of the app's `ai`. */
type StreamTextOptions = Parameters<typeof streamText>[0];

/**
 * The app's own callbacks (docs/runners.md, "The app's own hooks"): each streamText option of the app's `ai` whose
 * name starts `on` or `experimental_on` — onStepFinish, onFinish, onChunk, onError, onAbort, experimental_onStart,
 * experimental_onToolCallStart, … (ai 7: onStepEnd, onToolExecutionStart, … too). Each is called as the SDK calls it
 * without forkline; the step's own are called after forkline recorded the step. Mode `generate` calls those
 * generateText has (not onChunk, onError, onAbort).
 */
export type AiSdkCallbacks = {
  [K in keyof StreamTextOptions as K extends `on${string}` | `experimental_on${string}` ? K : never]?: StreamTextOptions[K];
};

export interface AiSdkRunOptions extends AiSdkCallbacks {
  /** The model for sessions that name none. */
  model?: AiSdkModel;
  /**
   * The runner's model for the one a session names (Session.model: `{provider, model}`; a fan-out's
   * variants may name different ones). Undefined: this runner cannot serve it, and the turn fails saying so.
   */
  resolveModel?: (requested: RequestedModel) => AiSdkModel | undefined;
  /** The runner's tools (AI SDK `tool({...})` with `execute`). */
  tools?: ToolSet;
  /** Each tool's effect, as declared to forkline (default `side-effects`: a cut-off call is never assumed safe to repeat). */
  effects?: Record<string, ToolEffect>;
  /** Compact with the session's model when a request is over its budget (ModelRequest.compaction; default true). */
  compact?: boolean;
  /** Steps per turn (default 16); a turn still calling tools after them ends `failed`. */
  maxSteps?: number;
  /** `generate`: generateText, no deltas (default `stream`). */
  mode?: 'stream' | 'generate';
  /**
   * The `streamText` result of each turn (or the rest of one) as it starts, in mode `stream`: the app's own view
   * of it (its `toUIMessageStream` for useChat, its `fullStream`). Read it through (an unread stream is buffered).
   * Every part of a call goes by the id the SDK runs it by (docs/runners.md#call-ids), and its input streams in
   * once the model's answer is stored.
   */
  onStream?: (result: ReturnType<typeof streamText>) => void;
  system?: string;
  /**
   * Cancels the work (the app stopping): no new turn starts, a tool whose call is stored but has not started
   * does not run, and the turn ends `failed` with its calls recorded as not run.
   */
  signal?: AbortSignal;
}

/**
 * ModelRequest.messages (OpenAI chat format, as forkline builds them) as AI SDK model messages, each call's tool under
 * `wireName` (RequestWireNames: the form providers take, docs/runners.md#wire-names).
 */
export function toModelMessages(messages: readonly ChatMessage[], wireName: (name: string) => string = (name) => name): ModelMessage[] {
  const toolNames = new Map<string, string>();
  const out: ModelMessage[] = [];
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user':
        out.push({ role: 'user', content: m.content });
        break;
      case 'assistant': {
        const parts: Array<{ type: 'text'; text: string } | { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown }> = [];
        if (m.content) parts.push({ type: 'text', text: m.content });
        for (const c of m.tool_calls ?? []) {
          toolNames.set(c.id, wireName(c.function.name));
          parts.push({ type: 'tool-call', toolCallId: c.id, toolName: wireName(c.function.name), input: parseArguments(c.function.arguments) });
        }
        out.push({ role: 'assistant', content: parts });
        break;
      }
      case 'tool':
        out.push({
          role: 'tool',
          content: [
            {
              type: 'tool-result',
              toolCallId: m.tool_call_id,
              toolName: toolNames.get(m.tool_call_id) ?? 'unknown',
              output: { type: 'text', value: m.content },
            },
          ],
        });
        break;
    }
  }
  return out;
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text || '{}');
  } catch {
    return {};
  }
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : typeof err === 'string' ? err : JSON.stringify(err ?? null));

/**
 * The text a failed call's result holds: the error's message (a thrown string as it is, anything else as JSON, none:
 * `unknown error`), as ai 6's `error-text` words it, whatever the installed major (ai 7 words it `Error: <message>`,
 * and @ai-sdk/openai 4 sends that wrapped, `{"error": …}`). The model is handed the result as a request built from the
 * log renders it (handedPrompt), so a later step or a fork hands the model what this step did.
 */
const NO_TEXT_FORM = 'the tool threw an error that has no text form';

function handedErrorText(err: unknown): string {
  if (err == null) return 'unknown error';
  if (typeof err === 'string') return err;
  if (err instanceof Error) return err.message;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    // No JSON form (a BigInt, a cycle), nor perhaps any text form at all (a toString that throws).
    try {
      return String(err);
    } catch {
      return NO_TEXT_FORM;
    }
  }
}

/**
 * Provider-defined tools the runner runs itself (docs/runners.md#provider-tools), by id, for provider packages that
 * do not mark their tools (ai 6's: `isProviderExecuted` is ai 7's): Anthropic's bash, text editor, computer and
 * memory; OpenAI's local shell, shell, apply_patch and custom tools. The provider only asks for their calls.
 * ai 6's packages say it nowhere a program can read (their tools are built alike, and @ai-sdk/anthropic's response
 * parser alone knows a `tool_use` from a `server_tool_use`): tests/client/runner-provider-tool-ids.test.ts fails
 * when an installed provider package has a tool id this list has not classified.
 */
const RUNNER_RUN_PROVIDER_TOOL =
  /^(anthropic\.(bash|text_editor|computer|computer_toolset|memory)_\d{8}|openai\.(local_shell|shell|apply_patch|computer|custom))$/;

/** What the adapter reads of an AI SDK provider tool (`type: 'provider'`). */
interface ProviderTool {
  type?: string;
  id?: string;
  isProviderExecuted?: boolean;
  args?: { environment?: { type?: string }; name?: string; execution?: string };
}

/**
 * The name the provider offers a runner-run provider tool by, and names its calls by (the provider packages' own
 * tables, `providerToolNames` of @ai-sdk/anthropic and @ai-sdk/openai); OpenAI's custom tool goes by its `name`.
 * Undefined: not known here.
 */
function providerToolName(p: ProviderTool): string | undefined {
  if (p.id === 'openai.custom') return p.args?.name;
  const anthropic = /^anthropic\.(bash|text_editor|computer|computer_toolset|memory)_(\d{8})$/.exec(p.id ?? '');
  if (anthropic) {
    const [, kind, version] = anthropic;
    if (kind === 'text_editor') return version < '20250429' ? 'str_replace_editor' : 'str_replace_based_edit_tool';
    return kind === 'computer_toolset' ? 'computer' : kind;
  }
  return /^openai\.(local_shell|shell|apply_patch)$/.exec(p.id ?? '')?.[1];
}

/**
 * Whether the provider runs this tool itself, inside the model call, before its answer reaches the runner, so
 * its call could never be in the log first (web search, code execution, …). A provider tool is the runner's only
 * when it has an `execute` and its package says it is not provider-run (ai 7: `isProviderExecuted: false`; ai 6:
 * an id of RUNNER_RUN_PROVIDER_TOOL); any other is taken as the provider's, even with an `execute` (ai 6 lets a web
 * search take one; the provider still runs it). OpenAI's shell in a hosted container runs at OpenAI, and so does
 * its tool search unless the app runs it (`execution: 'client'`): ai 7 marks both not provider-run whatever
 * their arguments say.
 */
function providerRuns(t: ToolSet[string]): boolean {
  const p = t as ProviderTool;
  if (p.type !== 'provider') return false;
  if (!t.execute || p.isProviderExecuted === true) return true;
  if (p.id === 'openai.shell' && /^container/.test(p.args?.environment?.type ?? '')) return true;
  if (p.id === 'openai.tool_search') return p.args?.execution !== 'client';
  return p.isProviderExecuted === undefined && !RUNNER_RUN_PROVIDER_TOOL.test(p.id ?? '');
}

/**
 * Why a turn offering these tools fails before the model is called (none: the turn may run): tools the provider
 * runs, and provider tools under a name other than the provider's. A provider-defined tool goes to the provider
 * under the provider's own name (`bash`) and its calls come back under it (@ai-sdk/anthropic does not map them back
 * to the app's key), so the runner's name for it must be that name, sent as it is: under another key (`shell`), or
 * a wire form (docs/runners.md#wire-names), its calls would name no offered tool and run nothing.
 */
export function providerToolRefusal(tools: ToolSet = {}): string | undefined {
  const provided = Object.entries(tools).filter(([, t]) => (t as ProviderTool).type === 'provider');
  const hosted = provided.flatMap(([name, t]) => (providerRuns(t) ? [name] : []));
  const list = (names: string[]) => `${names.length > 1 ? 'tools' : 'tool'} "${names.join('", "')}"`;
  if (hosted.length)
    return `the provider runs ${list(hosted)} itself, inside the model call, before ${hosted.length > 1 ? 'their calls' : 'its call'} could be recorded: @forkline/ai-sdk offers the model only tools the runner runs`;
  const renamed = provided.flatMap(([name]) => (needsWireNames([name]) ? [name] : []));
  if (renamed.length)
    return `provider ${list(renamed)} would be sent under a wire form, and the provider answers ${renamed.length > 1 ? 'their calls' : 'its calls'} by its own name: give a provider tool the name the provider gives it (such as "bash")`;
  const misnamed = provided.flatMap(([name, t]) => {
    const own = providerToolName(t as ProviderTool);
    return own !== undefined && own !== name ? [`tool "${name}" is the provider's "${own}"`] : [];
  });
  if (misnamed.length)
    return `a provider tool must go by the name the provider gives it (the provider names its calls by that name; under another they would run nothing): ${misnamed.join(', ')}`;
  return undefined;
}

/** The runner's tools as declared to forkline: name, description, JSON Schema, effect. */
export async function aiSdkToolDeclarations(tools: ToolSet = {}, effects: Record<string, ToolEffect> = {}): Promise<RunnerToolDeclaration[]> {
  return Promise.all(
    Object.entries(tools).map(async ([name, t]) => {
      const schema = t.inputSchema ? ((await asSchema(t.inputSchema).jsonSchema) as Record<string, unknown>) : undefined;
      const { $schema: _, ...inputSchema } = schema ?? {};
      return { name, effect: effects[name] ?? 'side-effects', ...(t.description ? { description: t.description } : {}), ...(schema ? { inputSchema } : {}) };
    }),
  );
}

/** The AI SDK's call settings from the ones forkline recorded (session/model settings; chat-completions names too). */
export function aiSdkCallSettings(settings: Record<string, unknown> | undefined): CallSettings {
  const names: Record<string, string> = {
    temperature: 'temperature',
    topP: 'topP',
    top_p: 'topP',
    topK: 'topK',
    top_k: 'topK',
    maxOutputTokens: 'maxOutputTokens',
    max_tokens: 'maxOutputTokens',
    presencePenalty: 'presencePenalty',
    presence_penalty: 'presencePenalty',
    frequencyPenalty: 'frequencyPenalty',
    frequency_penalty: 'frequencyPenalty',
    seed: 'seed',
    stopSequences: 'stopSequences',
    stop: 'stopSequences',
  };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(settings ?? {})) if (names[k]) out[names[k]] = k === 'stop' && typeof v === 'string' ? [v] : v;
  return out as CallSettings;
}

const usageOf = (u: LanguageModelV3Usage | undefined) =>
  u?.inputTokens?.total !== undefined || u?.outputTokens?.total !== undefined
    ? { inputTokens: u?.inputTokens?.total ?? 0, outputTokens: u?.outputTokens?.total ?? 0 }
    : undefined;

/** The model's own calls (not the provider's: it ran those itself and answered them), each under the name of the tool it calls. */
const callsOf = (content: Array<LanguageModelV3Content | LanguageModelV3StreamPart>, names: RequestWireNames): RunnerToolCall[] =>
  content.flatMap((p) =>
    p.type === 'tool-call' && !p.providerExecuted ? [{ id: p.toolCallId, name: names.toolOf(p.toolName), arguments: p.input || '{}' }] : [],
  );

/**
 * A turn's calls by the ids the AI SDK runs them by: the ids RunCallIds hands it (docs/runners.md#call-ids), each
 * standing for the id the log holds.
 */
interface TurnCalls {
  ids: RunCallIds;
  /** The open step's calls. */
  open: Map<string, AdmittedCall>;
  /** The calls whose result is stored. */
  answered: Set<string>;
  /** Why a stored call does not run (its result, stored with its answer). */
  refused: Map<string, string>;
  /** The calls whose `execute` was called. */
  started: Set<string>;
  /** Each answered call's result as the log holds it, which is what the model is handed (handedPrompt). */
  results: Map<string, ToolResultContent>;
}

/** Stores a call's result, and keeps it as the log holds it (TurnWriter.result) for the next model call of the turn (handedPrompt). */
async function storeResult(turn: TurnWriter, calls: TurnCalls, sentId: string, call: { id: string; name: string }, result: ToolResultContent): Promise<void> {
  calls.results.set(sentId, await turn.result(call, result.status, result.content));
}

/**
 * The prompt the SDK built for the next step, with each result of this turn's calls as the log holds it, in the form
 * a request built from the log hands it (handedResultText: text, an error's marked `Error: `). What the SDK makes of a
 * failed call depends on its major and the provider package (ai 7 and @ai-sdk/openai 4 send a thrown error's text
 * wrapped, `{"error": "Error: …"}`; an error's text over maxResultBytes is not what the log holds): a fork or a later
 * turn, built from the log, would otherwise send the model something else than this turn did (docs/runners.md,
 * "What a tool hands back").
 */
function handedPrompt<P extends ReadonlyArray<{ role: string; content: unknown }>>(prompt: P, calls: TurnCalls): P {
  return prompt.map((m) =>
    m.role === 'tool' && Array.isArray(m.content)
      ? {
          ...m,
          content: m.content.map((p: { type?: string; toolCallId?: string }) => {
            const stored = p.type === 'tool-result' && p.toolCallId !== undefined ? calls.results.get(p.toolCallId) : undefined;
            return stored ? { ...p, output: handedOutput(stored) } : p;
          }),
        }
      : m,
  ) as unknown as P;
}

/** An answer's own calls under the ids the SDK is handed for them (the others as they are). */
function handedOn<P extends LanguageModelV3Content | LanguageModelV3StreamPart>(parts: P[], admitted: AdmittedCall[]): P[] {
  let n = 0;
  return parts.map((p) => (p.type === 'tool-call' && !p.providerExecuted ? { ...p, toolCallId: admitted[n++].sentId } : p));
}

/** A streamed part of the input of one of the model's own calls (`tool-input-start`, `-delta`, `-end`). */
type InputPart = Extract<LanguageModelV3StreamPart, { type: 'tool-input-start' | 'tool-input-delta' | 'tool-input-end' }>;

const isInputPart = (p: LanguageModelV3StreamPart): p is InputPart =>
  p.type === 'tool-input-start' || p.type === 'tool-input-delta' || p.type === 'tool-input-end';

/**
 * The streamed input of an answer's calls, held until the calls are stored: a call's id is known only then (RunCallIds
 * admits an answer's calls together, docs/runners.md#call-ids), and a reader of the stream (the `ai` UI message stream)
 * ties a call's input to its call by the id, so each part goes out with its call under the id the call is handed on
 * under. By the model's id, in order: an answer giving two calls one id streams the first's input, then the second's.
 */
class HeldInputs {
  private readonly byId = new Map<string, InputPart[][]>();

  /** Whether `part` is held: a provider-executed call's parts are not (the provider ran it; its id is its own). */
  add(part: InputPart): boolean {
    const runs = this.byId.get(part.id);
    if (part.type === 'tool-input-start') {
      if (part.providerExecuted) return false;
      if (runs) runs.push([part]);
      else this.byId.set(part.id, [[part]]);
      return true;
    }
    if (!runs) return false;
    runs[runs.length - 1].push(part);
    return true;
  }

  /** The held input of the next call the model gave `id` (none: it streamed none). */
  take(id: string): InputPart[] {
    return this.byId.get(id)?.shift() ?? [];
  }

  clear(): void {
    this.byId.clear();
  }
}

/**
 * `model` writing each of its calls through `turn`: the step's start before
 * the call, its message (with its tool calls) once the model finished and
 * before the AI SDK sees the calls (so before any tool runs), each under the id
 * RunCallIds gives it (a call it refuses is answered with its message and never
 * runs). A retried call (the SDK's maxRetries) stays in its step.
 */
function writingModel(model: AiSdkModel, turn: TurnWriter, calls: TurnCalls, names: RequestWireNames): AiSdkModel {
  const record = async (text: string, toolCalls: RunnerToolCall[], usage: LanguageModelV3Usage | undefined) => {
    const admitted = calls.ids.admit(toolCalls, turn.turn, turn.step);
    for (const c of admitted) calls.open.set(c.sentId, c);
    await turn.message({ text, toolCalls: admitted, usage: usageOf(usage) });
    for (const c of admitted) {
      if (c.refused === undefined) continue;
      calls.refused.set(c.sentId, c.refused);
      // Arguments that are not JSON: the SDK answers the call itself (its invalid-input error), never reaching the
      // `execute` that hands the model the refusal; that answer is stored as for any such call (recordStep).
      if (!parsesAsJson(c.arguments)) continue;
      calls.answered.add(c.sentId);
      await storeResult(turn, calls, c.sentId, c, { status: 'error', content: c.refused });
    }
    return admitted;
  };
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v3',
      transformParams: async ({ params }) => ({ ...params, prompt: handedPrompt(params.prompt, calls) }),
      wrapGenerate: async ({ doGenerate }) => {
        await turn.startStep();
        const result = await doGenerate();
        const text = result.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
        const admitted = await record(text, callsOf(result.content, names), result.usage);
        return { ...result, content: handedOn(result.content, admitted) };
      },
      wrapStream: async ({ doStream }) => {
        await turn.startStep();
        const { stream, ...rest } = await doStream();
        let text = '';
        const held: Array<Extract<LanguageModelV3StreamPart, { type: 'tool-call' }>> = [];
        const inputs = new HeldInputs();
        const transform = new TransformStream<LanguageModelV3StreamPart, LanguageModelV3StreamPart>({
          async transform(part, controller) {
            if (part.type === 'text-delta') {
              text += part.delta;
              if (part.delta) void turn.delta(part.delta);
            }
            // Released with its call, under the call's id (a provider-executed call's pass as they came).
            if (isInputPart(part) && inputs.add(part)) return;
            if (part.type === 'tool-call' && !part.providerExecuted) {
              held.push(part); // released once the call is stored
              return;
            }
            if (part.type === 'finish') {
              // A stream that ended before the provider said why (a connection cut between events: the providers' own
              // models report `other` (ai 6) or `interrupted` (ai 7) with no raw reason) is as a connection lost
              // mid-answer, as forkline's own agent takes it: its calls are not stored and none runs, and the turn
              // fails (docs/agents.md#models). The SDK would run them, or go on from a half-made call.
              if (unfinished(part.finishReason)) {
                held.length = 0;
                inputs.clear();
                throw new Error(INCOMPLETE_ANSWER);
              }
              const admitted = await record(text, callsOf(held, names), part.usage);
              const calls = held.splice(0);
              handedOn(calls, admitted).forEach((h, i) => {
                for (const p of inputs.take(calls[i].toolCallId)) controller.enqueue({ ...p, id: h.toolCallId });
                controller.enqueue(h);
              });
              inputs.clear(); // input of a call the answer never completed: never recorded, so never shown
            }
            controller.enqueue(part);
          },
          flush(controller) {
            // A stream that ended without its finish part: its calls are not stored, so they do not run.
            held.length = 0;
            inputs.clear();
            void controller;
          },
        });
        return { stream: stream.pipeThrough(transform), ...rest };
      },
    },
  });
}

/** Whether a stream's finish part says the provider never said why its answer ended. */
function unfinished(reason: unknown): boolean {
  const r = reason as { unified?: string; raw?: string } | string | undefined;
  return typeof r === 'object' && r !== null && r.raw === undefined && (r.unified === 'other' || r.unified === 'interrupted');
}

/** A call cancelled before its tool started: its result says it did not run (unless nothing can be written any more), then the SDK sees the abort. */
async function notStarted(reason: unknown, record: (outcome: ToolResultContent) => Promise<void>): Promise<never> {
  await record({ status: 'error', content: cancelledBeforeStart(reason) }).catch(() => {});
  throw reason;
}

/**
 * The finish reasons of an answer whose calls the AI SDK runs (ai 6 and 7 alike; its
 * isToolExecutionAllowedFinishReason, which `ai` does not export). An answer that ended otherwise (`length`,
 * `content-filter`, …) has its calls stored, but none of them runs.
 */
const RUNS_CALLS_ON = new Set(['stop', 'tool-calls']);

/** The result of a stored call the AI SDK did not run because of how the model's answer ended. */
const declinedContent = (finishReason: string) =>
  `the call did not run: the model's answer ended with finish reason "${finishReason}", and the AI SDK runs the calls of an answer only when it ended with "stop" or "tool-calls"`;

const isAsyncIterable = (v: unknown): v is AsyncIterable<unknown> => v != null && typeof (v as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';

/** What a tool's `toModelOutput` answers (the AI SDK's ToolResultOutput, as far as the adapter reads it). */
interface ModelOutput {
  type: string;
  value?: unknown;
  reason?: string;
}

/**
 * A tool's output as the result the log holds, which is what the model is
 * handed (writingTools): the tool's `toModelOutput` when it has one (what it
 * keeps from the model is never stored: every later request and fork is built
 * from the log), else the output itself. A result's content is text
 * (docs/contract.md): `json` is stored as JSON, `content` as its text parts,
 * each part that is not text (an image, a file) as a note saying it was left
 * out; `error-text`, `error-json` and `execution-denied` are `error` results.
 */
async function modelOutputContent(t: ToolSet[string], call: { id: string; input: unknown }, output: unknown, maxBytes: number): Promise<ToolResultContent> {
  if (!t.toModelOutput) return toolResultContent(output, maxBytes);
  let shown: ModelOutput;
  try {
    shown = (await t.toModelOutput({ toolCallId: call.id, input: call.input, output })) as ModelOutput;
  } catch (err) {
    return { status: 'error', content: `the tool ran, but its toModelOutput failed (${errorText(err)}): its output is not recorded` };
  }
  const error = (content: ToolResultContent) => ({ ...content, status: 'error' as const });
  switch (shown?.type) {
    case 'text':
      return toolResultContent(String(shown.value ?? ''), maxBytes);
    case 'json':
      return toolResultContent(shown.value, maxBytes);
    case 'error-text':
      return error(toolResultContent(String(shown.value ?? ''), maxBytes));
    case 'error-json':
      return error(toolResultContent(shown.value, maxBytes));
    case 'execution-denied':
      return error(toolResultContent(shown.reason ?? 'Tool call execution denied.', maxBytes));
    case 'content': {
      const parts = Array.isArray(shown.value) ? (shown.value as Array<{ type?: unknown; text?: unknown; mediaType?: unknown }>) : [];
      const texts = parts.map((p) =>
        p?.type === 'text'
          ? String(p.text ?? '')
          : `[a ${String(p?.type)} part${typeof p?.mediaType === 'string' ? ` (${p.mediaType})` : ''} was left out: a recorded result is text]`,
      );
      return toolResultContent(texts.join('\n'), maxBytes);
    }
    default:
      return { status: 'error', content: `the tool ran, but its toModelOutput answered an output of type ${JSON.stringify(shown?.type)}: it is not recorded` };
  }
}

/**
 * A stored result as the AI SDK hands it to the model (the tool's `toModelOutput` in writingTools, handedPrompt): the
 * log's text as a request built from the log renders it, as text (an `error-text` output reaches the model wrapped,
 * `{"error": …}`, with @ai-sdk/openai 4).
 */
const handedOutput = (result: ToolResultContent) => ({ type: 'text' as const, value: handedResultText(result) });

/**
 * The tools with each `execute` storing its result (ok, or error with the
 * failure) as soon as it returns. An output that is not JSON, or over the
 * runner's maxResultBytes, is an `error` result saying the tool ran. An
 * `execute` that streams (an async iterable: preliminary outputs, then the
 * final one) is handed to the SDK as one, so it runs, and its result is its
 * last output. What is stored is the tool's `toModelOutput` of it
 * (modelOutputContent), and the model is handed exactly that text: the tool's
 * `toModelOutput` is replaced by the stored result. A tool the session asks a
 * decision for (approvalRequired) needs approval as one the app marked
 * (`needsApproval`).
 */
function writingTools(tools: ToolSet, turn: TurnWriter, calls: TurnCalls, request: ModelRequest, names: RequestWireNames): ToolSet {
  // Each tool under the name it is offered by (docs/runners.md#wire-names); its calls are recorded under its own.
  const offered = Object.entries(tools).filter(([name]) => names.offers(name));
  return Object.fromEntries(
    offered.map(([name, t]) => {
      const execute = t.execute;
      if (!execute) return [names.wireName(name), t];
      /** Each call's stored result, which its `toModelOutput` hands the model. */
      const stored = new Map<string, ToolResultContent>();
      const wrapped: typeof execute = (input, handed) => {
        const sentId = handed.toolCallId;
        // A call stored with its refusal (an id the log cannot hold, another call's of its answer) never runs: the model reads why.
        const refusal = calls.refused.get(sentId);
        if (refusal !== undefined) {
          stored.set(sentId, { status: 'error', content: refusal });
          if (calls.answered.has(sentId)) return Promise.resolve(refusal);
          // Refused with arguments that are not JSON, yet run (the app's repairToolCall mended them): stored now.
          calls.answered.add(sentId);
          return storeResult(turn, calls, sentId, { id: calls.ids.recorded(sentId), name }, { status: 'error', content: refusal }).then(() => refusal);
        }
        // The tool sees its call as the log holds it.
        const call = { id: calls.ids.recorded(sentId), name };
        const options = { ...handed, toolCallId: call.id };
        const record = async (outcome: ToolResultContent) => {
          calls.answered.add(sentId);
          stored.set(sentId, outcome);
          await storeResult(turn, calls, sentId, call, outcome);
        };
        const shown = (output: unknown) => modelOutputContent(t, { id: call.id, input }, output, turn.session.maxResultBytes);
        // Cancelled (or the lease lost) after the call was stored, before the tool started: it does not run, and its result says so.
        if (options.abortSignal?.aborted) return notStarted(options.abortSignal.reason, record);
        // The check at the act: a lease run out while the call was being stored (a pause: GC, SIGSTOP) runs nothing and writes nothing.
        try {
          turn.session.assertHeld();
        } catch (err) {
          return Promise.reject(err);
        }
        const failed = async (err: unknown): Promise<never> => {
          const content = handedErrorText(err);
          await record({ status: 'error', content });
          // An error with no text form would break the SDK's own wording of it (and the step): it sees one that says so.
          throw content === NO_TEXT_FORM ? new Error(NO_TEXT_FORM) : err;
        };
        let output: ReturnType<typeof execute>;
        try {
          calls.started.add(sentId);
          output = execute(input, options);
        } catch (err) {
          return failed(err);
        }
        if (isAsyncIterable(output)) {
          const outputs = output;
          return (async function* () {
            let last: unknown;
            try {
              for await (const o of outputs) yield (last = o);
            } catch (err) {
              return failed(err);
            }
            await record(await shown(last));
          })();
        }
        return Promise.resolve(output).then(async (value) => {
          const outcome = await shown(value);
          await record(outcome);
          // An output the log cannot hold (not JSON, too big) goes no further: the SDK sees the error that says so.
          return outcome.status === 'error' && !t.toModelOutput ? outcome.content : value;
        }, failed);
      };
      // The model reads what the log holds (an output that could not be stored: the error that says so), never the raw output.
      const toModelOutput = async (options: { toolCallId: string; input: unknown; output: unknown }) => {
        const result = stored.get(options.toolCallId);
        return handedOutput(
          result ?? (await modelOutputContent(t, { id: options.toolCallId, input: options.input }, options.output, turn.session.maxResultBytes)),
        );
      };
      const needs = sessionRequiresApproval(request, name) || t.needsApproval;
      // A refused call is answered already: it is never asked for.
      const needsApproval: typeof needs =
        needs &&
        ((input, o) =>
          !calls.refused.has(o.toolCallId) && (typeof needs !== 'function' || needs(input, { ...o, toolCallId: calls.ids.recorded(o.toolCallId) })));
      return [names.wireName(name), { ...t, execute: wrapped, toModelOutput, needsApproval }];
    }),
  ) as ToolSet;
}

/**
 * A call of the open step taken up after a person's decision (settleOpenCalls),
 * run outside the SDK's loop: its input checked against the tool's schema, its
 * `execute` run (a streaming one to its last output), its output stored as
 * the SDK's own runs are (its `toModelOutput`: what the model will be handed).
 */
async function runDecided(tools: ToolSet, call: RunnerToolCall, session: RunnerSession, signal: AbortSignal): Promise<ToolResultContent> {
  const t = tools[call.name];
  if (!t?.execute) return { status: 'error', content: 'the runner has no such tool' };
  if (signal.aborted) return { status: 'error', content: cancelledBeforeStart(signal.reason) };
  let input = parseArguments(call.arguments);
  const checked = t.inputSchema ? await asSchema(t.inputSchema).validate?.(input) : undefined;
  // What the SDK's own check of a call's input hands the model.
  if (checked && !checked.success)
    return { status: 'error', content: handedErrorText(new InvalidToolInputError({ toolName: call.name, toolInput: call.arguments, cause: checked.error })) };
  if (checked) input = checked.value;
  try {
    let output: unknown = await t.execute(input, { toolCallId: call.id, messages: [], abortSignal: signal });
    if (isAsyncIterable(output)) {
      let last: unknown;
      for await (const o of output) last = o;
      output = last;
    }
    return await modelOutputContent(t, { id: call.id, input }, output, session.maxResultBytes);
  } catch (err) {
    return { status: 'error', content: handedErrorText(err) };
  }
}

/** Whether the app's tool asks for a person's decision on this call (the AI SDK's `needsApproval`, a flag or a function of the input). */
async function toolNeedsApproval(tools: ToolSet, call: RunnerToolCall, request: ModelRequest): Promise<boolean> {
  if (sessionRequiresApproval(request, call.name)) return true;
  const needs = tools[call.name]?.needsApproval;
  if (typeof needs !== 'function') return needs === true;
  return needs(parseArguments(call.arguments) as never, { toolCallId: call.id, messages: [] });
}

/**
 * Runs the session's work with the AI SDK: an open turn's next steps, then
 * one turn per pending input, until nothing is left (or the lease is lost).
 * The tools are declared first (a set already declared costs nothing).
 */
export async function runAiSdkTurns(session: RunnerSession, opts: AiSdkRunOptions): Promise<number> {
  await session.declareTools(await aiSdkToolDeclarations(opts.tools, opts.effects));
  // A tool providers refuse by its own name is offered under the form the request lists once its declaration is stored.
  if (needsWireNames(Object.keys(opts.tools ?? {}))) await session.storeDeclaredTools();
  let turns = 0;
  let compacting = opts.compact ?? true;
  for (;;) {
    const request = await session.modelRequest();
    const requested = requestedModel(request);
    const model = requested ? opts.resolveModel?.(requested) : opts.model;
    if (compacting && request.compaction && model) {
      // Over the budget: the runner's model summarises first (a failed summary is not tried again in this claim).
      compacting = await writeRunnerCompaction(session, request.compaction, (messages) => summarizeWith(model, messages, session.signal));
      continue;
    }
    if (request.turn == null || request.step == null || opts.signal?.aborted) return turns;
    // A call still awaits a person's decision (a claim of a WAITING session): nothing runs until it is decided.
    if (request.openCalls.some((c) => c.approval === 'pending')) return turns;
    await runAiSdkTurn(session, request, opts);
    turns++;
  }
}

/** A summary of `messages` by the AI SDK model (streamed: a model that only streams serves too). */
async function summarizeWith(model: AiSdkModel, messages: ChatMessage[], abortSignal: AbortSignal): Promise<string> {
  let failure: unknown;
  const result = streamText({ model, prompt: summaryPrompt(messages), abortSignal, onError: ({ error }) => void (failure ??= error) });
  const text = await result.text;
  if (failure) throw failure;
  return text;
}

/**
 * Options named like a callback that the SDK is not handed as the app gave them: the adapter's own (`onStream`), the
 * ones the adapter calls after its own (the step's end — `onStepFinish`, and ai 7's `onStepEnd`, which ai 7 takes
 * for the same callback — and `onError`), and in mode `generate` the stream's (generateText has none of them).
 */
const NOT_PASSED = {
  stream: new Set(['onStream', 'onStepFinish', 'onStepEnd', 'onError']),
  generate: new Set(['onStream', 'onStepFinish', 'onStepEnd', 'onError', 'onChunk', 'onAbort']),
};

/** The app's callbacks (AiSdkCallbacks): those the SDK is handed as they are, and those the adapter calls after its own. */
function appCallbacks(opts: AiSdkRunOptions, mode: 'stream' | 'generate') {
  const own = opts as Record<string, unknown>;
  type Call = ((event: never) => unknown) | undefined;
  const passed = Object.fromEntries(
    Object.entries(own).filter(([name, value]) => /^(experimental_)?on[A-Z]/.test(name) && !NOT_PASSED[mode].has(name) && value),
  );
  return { passed, stepEnd: (own.onStepEnd ?? own.onStepFinish) as Call, error: own.onError as Call };
}

/** One turn (or the rest of an open one) from `request`. */
export async function runAiSdkTurn(session: RunnerSession, request: ModelRequest, opts: AiSdkRunOptions): Promise<void> {
  let turn = session.turn(request);
  const maxSteps = opts.maxSteps ?? 16;
  const requested = requestedModel(request);
  // The session's model decides: one the runner cannot serve fails the turn, never runs on another.
  const base = requested ? opts.resolveModel?.(requested) : opts.model;
  if (!base) return turn.end('failed', unservableModel(requested, !!opts.resolveModel));
  const refusal = providerToolRefusal(opts.tools);
  if (refusal) return turn.end('failed', refusal);
  if (request.stepOpen && request.openCalls.length > 0) {
    // A step taken up after a person's decision: its calls are settled from the log, then the turn goes on from the next step.
    const tools = opts.tools ?? {};
    const signal = opts.signal ? AbortSignal.any([session.signal, opts.signal]) : session.signal;
    const decided = request;
    const resumed = await resumeDecidedStep(session, turn, request, {
      run: (call) => runDecided(tools, call, session, signal),
      needsApproval: (call) => toolNeedsApproval(tools, call, decided),
    });
    if (!resumed) return;
    ({ request, turn } = resumed);
  }
  /** The tools' names on the wire, and back (docs/runners.md#wire-names). */
  const names = new RequestWireNames(request, Object.keys(opts.tools ?? {}));
  const calls: TurnCalls = {
    ids: new RunCallIds(request.messages as ChatMessage[]),
    open: new Map(),
    answered: new Set(),
    refused: new Map(),
    started: new Set(),
    results: new Map(),
  };
  const { open, answered } = calls;
  let failure: unknown;
  /** Why the SDK ran none of a step's stored calls (how the model's answer ended), when it did not. */
  let declined: string | undefined;
  const abort = new AbortController();
  const onLost = () => abort.abort(session.signal.reason);
  const onCancel = () => abort.abort(opts.signal?.reason);
  session.signal.addEventListener('abort', onLost, { once: true });
  opts.signal?.addEventListener('abort', onCancel, { once: true });
  const app = appCallbacks(opts, opts.mode === 'generate' ? 'generate' : 'stream');
  const recordStep = async (result: StepResult<ToolSet>) => {
    // Calls the SDK stopped at for a person's decision (needsApproval): not run, asked in the log (the lease goes back with it).
    const asked = [...open].filter(
      ([sentId]) => !answered.has(sentId) && result.content.some((p) => p.type === 'tool-approval-request' && p.toolCall.toolCallId === sentId),
    );
    // Calls no wrapped `execute` answered (invalid input, a tool the runner lacks, one without execute, an answer
    // whose end keeps the SDK from running its calls): their outcome as the SDK saw it.
    const runsCalls = RUNS_CALLS_ON.has(result.finishReason);
    for (const [sentId, call] of open) {
      if (answered.has(sentId) || asked.some(([asking]) => asking === sentId)) continue;
      answered.add(sentId);
      const ok = result.toolResults.find((r) => r.toolCallId === sentId);
      const failed = result.content.find((p) => p.type === 'tool-error' && p.toolCallId === sentId) as { error?: unknown } | undefined;
      if (!ok && !failed && !runsCalls) declined = `the model's answer ended with finish reason "${result.finishReason}": the AI SDK ran none of its calls`;
      const outcome = ok
        ? toolResultContent(ok.output, turn.session.maxResultBytes)
        : {
            status: 'error' as const,
            content: failed ? handedErrorText(failed.error) : runsCalls ? 'the runner has no such tool' : declinedContent(result.finishReason),
          };
      await storeResult(turn, calls, sentId, call, outcome);
    }
    if (asked.length) {
      open.clear();
      return turn.requestApproval(asked.map(([, call]) => call));
    }
    const called = open.size > 0;
    open.clear();
    turn.endStep();
    if (!called) await turn.end('completed');
  };
  // The app hears of a step once forkline recorded it.
  const onStepFinish = async (result: StepResult<ToolSet>) => {
    await recordStep(result);
    await app.stepEnd?.(result as never);
  };
  const common = {
    ...app.passed,
    ...aiSdkCallSettings(requested?.settings),
    model: writingModel(base, turn, calls, names),
    system: opts.system,
    messages: toModelMessages(request.messages as ChatMessage[], (name) => names.wireName(name)),
    // The session's instructions and forkline's own notes (a compaction's summary, left-out history) are system
    // messages of the request forkline built (docs/runners.md): ai 7 refuses them in `messages` unless allowed.
    allowSystemInMessages: true,
    tools: opts.tools ? writingTools(opts.tools, turn, calls, request, names) : undefined,
    stopWhen: stepCountIs(maxSteps),
    abortSignal: abort.signal,
    onStepFinish,
  };
  try {
    if (opts.mode === 'generate') {
      await generateText(common);
    } else {
      const result = streamText({
        ...common,
        onError: async (event: { error: unknown }) => {
          failure ??= event.error;
          await app.error?.(event as never);
        },
      });
      opts.onStream?.(result);
      await result.consumeStream({ onError: (error) => void (failure ??= error) });
    }
  } catch (err) {
    failure ??= err;
  } finally {
    session.signal.removeEventListener('abort', onLost);
    opts.signal?.removeEventListener('abort', onCancel);
  }
  if (turn.isEnded || (turn.isWaiting && !failure)) return;
  if (session.signal.aborted) throw failure ?? session.signal.reason; // the lease is gone: nothing more is ours to write
  if (opts.signal?.aborted) {
    // Cancelled by the app (a streamed run ends without an error: its onAbort): the turn fails saying so, never "stopped
    // after N steps". A tool the SDK started and did not wait for (streamText stops reading one that streams its
    // output) may still run: its result says so; a call it never started says that.
    failure ??= opts.signal.reason;
    for (const [sentId, call] of open)
      if (calls.started.has(sentId) && !answered.has(sentId)) await turn.result(call, 'error', cancelledWhileRunning(opts.signal.reason));
    await turn.cancelUnstarted(opts.signal.reason);
  }
  // The model or a write failed, or the steps ran out: the turn ends failed, as forkline's runner ends it.
  await turn.end('failed', failure ? errorText(failure) : (declined ?? `stopped after ${maxSteps} steps`));
}
