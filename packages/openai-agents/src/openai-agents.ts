// OpenAI Agents SDK adapter for external runners (docs/runners.md): runs an
// agent on a claimed session, from the conversation forkline builds
// (Session.modelRequest: a fork's synthetic results with their wording,
// compaction summaries), with the model the session names (resolveModel) and
// the settings it recorded. Each step is written as it happens, through the
// SDK's TurnWriter: the agent's model is wrapped so a step's start is stored
// before each model call and the response with its function calls before the
// run goes on to the tools (per step, not per run); each function tool's
// `invoke` is wrapped to store its result as soon as it returns. Text deltas
// of a streamed run go to sessionTurns subscribers; each response's usage is
// recorded with it. The agent's function tools are declared with their
// effects first, and offered under the names providers take
// (docs/runners.md#wire-names): the log keeps their own. A session over its budget (ModelRequest.compaction) is
// compacted with the session's model before its next turn.
//
//   await runner.run((s) => runAgentsTurns(s, agent, { effects: { send_email: 'side-effects' } }));
import {
  Agent,
  NoopSpan,
  NoopTrace,
  OPENAI_CHAT_COMPLETIONS_RAW_MODEL_EVENT_SOURCE,
  OpenAIProvider,
  RunContext,
  ToolTimeoutError,
  getCurrentTraceContext,
  invokeFunctionTool,
  Runner,
  RunToolApprovalItem,
  runToolInputGuardrails,
  runToolOutputGuardrails,
  Usage,
  withTrace,
  withTraceContext,
  type AgentInputItem,
  type Model,
  type ModelProvider,
  type ModelRequest as AgentsModelRequest,
  type ModelResponse,
  type ModelSettings,
  type Session,
  type Tool,
} from '@openai/agents';
import type { ChatMessage, ModelRequest, RunnerSession, RunnerToolCall, RunnerToolDeclaration, StepMessage, ToolEffect, TurnWriter } from '@forkline/runner';
import {
  cancelledBeforeStart,
  handedResultText,
  INCOMPLETE_ANSWER,
  parsesAsJson,
  needsWireNames,
  requestedModel,
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

// The Agents SDK's items are a wide union read field by field here; its own types use `any` for agent context and output.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Item = AgentInputItem & Record<string, any>;

/**
 * ModelRequest.messages (OpenAI chat format) as agent input items, each call's tool under `wireName` (RequestWireNames:
 * the form providers take, docs/runners.md#wire-names).
 */
export function toAgentItems(messages: readonly ChatMessage[], wireName: (name: string) => string = (name) => name): AgentInputItem[] {
  const names = new Map<string, string>();
  const out: Item[] = [];
  for (const m of messages) {
    if (m.role === 'system') out.push({ role: 'system', content: m.content } as Item);
    else if (m.role === 'user') out.push({ role: 'user', content: m.content } as Item);
    else if (m.role === 'assistant') {
      if (m.content) out.push({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: m.content }] } as Item);
      for (const c of m.tool_calls ?? []) {
        names.set(c.id, wireName(c.function.name));
        out.push({ type: 'function_call', callId: c.id, name: wireName(c.function.name), arguments: c.function.arguments, status: 'completed' } as Item);
      }
    } else if (m.role === 'tool') {
      out.push({
        type: 'function_call_result',
        callId: m.tool_call_id,
        name: names.get(m.tool_call_id) ?? 'unknown',
        status: 'completed',
        output: { type: 'text', text: m.content },
      } as Item);
    }
  }
  return out;
}

const outputText = (output: unknown): string => {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) return output.map(outputText).join('');
  const o = output as { type?: string; text?: string } | undefined;
  return o?.type === 'text' || typeof o?.text === 'string' ? (o?.text ?? '') : JSON.stringify(output ?? null);
};
const messageText = (item: Item): string =>
  typeof item.content === 'string' ? item.content : (item.content ?? []).map((p: { text?: string }) => p.text ?? '').join('');

/**
 * The SDK's `Session` (conversation memory) over a forkline session's model
 * request: getItems gives the conversation forkline builds as agent input
 * items, then what a run added. It writes nothing: runAgentsTurns writes each
 * step as it happens. A forkline log is append-only: popItem never removes a
 * stored event and clearSession refuses (fork the session instead).
 */
export class ForklineAgentsSession implements Session {
  /** Items a run added (getItems returns them after the history). */
  private readonly added: AgentInputItem[] = [];
  private readonly history: AgentInputItem[];

  constructor(
    private readonly session: RunnerSession,
    private readonly request: ModelRequest,
  ) {
    const messages = request.messages as ChatMessage[];
    // Outside an open turn the last message is the pending input: the run gives it as its input.
    // The history's calls under the names providers take (a call's form never depends on the tools offered).
    const names = new RequestWireNames(request, []);
    this.history = toAgentItems(request.inTurn ? messages : messages.slice(0, -1), (name) => names.wireName(name));
  }

  /** The input text the run starts with (the pending input), or undefined inside an open turn. */
  get input(): string | undefined {
    if (this.request.inTurn) return undefined;
    const last = (this.request.messages as ChatMessage[]).at(-1);
    return last?.role === 'user' ? last.content : undefined;
  }

  async getSessionId(): Promise<string> {
    return this.session.sessionId;
  }

  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const all = [...this.history, ...this.added];
    return limit === undefined ? all : all.slice(-limit);
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    this.added.push(...items);
  }

  /** The last item; stored events stay (the log is append-only): only an item a run added is dropped. */
  async popItem(): Promise<AgentInputItem | undefined> {
    return this.added.pop() ?? this.history.at(-1);
  }

  async clearSession(): Promise<void> {
    throw new Error(`forkline session ${this.session.sessionId} is an append-only log: fork it (forkSession) to start again from an earlier point`);
  }
}

export interface AgentsRunOptions {
  /** Model calls per turn (the SDK's maxTurns, default 16). */
  maxTurns?: number;
  /** Each function tool's effect, as declared to forkline (default `side-effects`). */
  effects?: Record<string, ToolEffect>;
  /**
   * The runner's model for the one a session names (Session.model: `{provider, model}`); a string is a
   * model name for `modelProvider`. Undefined: this runner cannot serve it, and the turn fails saying so.
   * A session naming no model runs on the agent's own.
   */
  resolveModel?: (requested: RequestedModel) => Model | string | undefined;
  /** Resolves model names (the agent's, or resolveModel's); default: the SDK's OpenAIProvider. */
  modelProvider?: ModelProvider;
  /** Run streamed (default): text deltas reach sessionTurns subscribers as they come. */
  stream?: boolean;
  /**
   * Compact a session over its budget (ModelRequest.compaction) with the model the session runs on before
   * its next turn (default true; docs/runners.md, Compaction). false: the longer request is sent.
   */
  compact?: boolean;
  /**
   * Cancels the work (the app stopping): no new turn starts, a tool whose call is stored but has not started
   * does not run, and the turn ends `failed` with its calls recorded as not run.
   */
  signal?: AbortSignal;
}

type FunctionTool = Extract<Tool, { type: 'function' }>;

/**
 * The tools a run of the agent offers: its own enabled tools and its MCP
 * servers' (Agent.getAllTools), so an MCP server's tools are declared and
 * wrapped as the agent's own are.
 */
async function agentsTools(agent: Agent<any, any>): Promise<Tool[]> {
  return (await agent.getAllTools(new RunContext())) as Tool[];
}

/**
 * What the adapter cannot record before it runs (docs/runners.md): a tool
 * that is not a function tool — hosted ones the provider runs inside the
 * model call, and shell, computer and apply-patch tools the SDK runs without
 * the `invoke` the adapter wraps — and handoffs, whose agent would go on with
 * a model and tools of its own. A turn of such an agent fails before its
 * model is called. Undefined: none.
 */
function unrecordableOf(agent: Agent<any, any>, tools: readonly Tool[]): string | undefined {
  const other = tools.filter((t) => t.type !== 'function').map((t) => `${t.type} tool "${t.name}"`);
  if (agent.handoffs.length) other.push(`handoffs (${agent.handoffs.map((h) => ('agentName' in h ? h.agentName : h.name)).join(', ')})`);
  if (!other.length) return undefined;
  return `${other.join(', ')}: their calls could not be recorded before they run, so @forkline/openai-agents does not run agents with them`;
}

/** The agent's function tools as declared to forkline: name, description, JSON Schema, effect. */
export function agentsToolDeclarations(tools: readonly Tool[], effects: Record<string, ToolEffect> = {}): RunnerToolDeclaration[] {
  return tools
    .filter((t): t is FunctionTool => t.type === 'function')
    .map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.parameters as unknown as Record<string, unknown>,
      effect: effects[t.name] ?? 'side-effects',
    }));
}

/** The Agents SDK's model settings from the ones forkline recorded (session/model settings). */
export function agentsModelSettings(settings: Record<string, unknown> | undefined): ModelSettings {
  const names: Record<string, keyof ModelSettings> = {
    temperature: 'temperature',
    topP: 'topP',
    top_p: 'topP',
    maxOutputTokens: 'maxTokens',
    max_tokens: 'maxTokens',
    presencePenalty: 'presencePenalty',
    presence_penalty: 'presencePenalty',
    frequencyPenalty: 'frequencyPenalty',
    frequency_penalty: 'frequencyPenalty',
  };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(settings ?? {})) if (names[k]) out[names[k]] = v;
  return out as ModelSettings;
}

/** A model response as a step's message: its text, its function calls (each under the name of the tool it calls), its usage. */
function stepMessage(response: ModelResponse, names?: RequestWireNames): StepMessage {
  const items = response.output as Item[];
  const text = items
    .filter((i) => i.type === 'message' || i.role === 'assistant')
    .map(messageText)
    .join('');
  const toolCalls: RunnerToolCall[] = items
    .filter((i) => i.type === 'function_call')
    .map((i) => ({ id: i.callId, name: names ? names.toolOf(i.name) : i.name, arguments: i.arguments || '{}' }));
  const u = response.usage as { inputTokens?: number; outputTokens?: number } | undefined;
  return {
    text,
    toolCalls,
    ...(u && (u.inputTokens || u.outputTokens) ? { usage: { inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0 } } : {}),
  };
}

/**
 * The calls of a run by the ids the SDK runs them by (docs/runners.md#call-ids): the id each is recorded under, and
 * why one that does not run does not (its result, stored with its answer).
 */
interface RunCalls {
  ids: RunCallIds;
  refused: Map<string, string>;
  /** Whether a call of the run is handed on under an id other than the one it is recorded under. */
  renamed: boolean;
  /** The stored calls no result is stored for yet, by the id the SDK runs them by. */
  unanswered: Map<string, AdmittedCall>;
  /** Each answered call's result as the log holds it, which is what the model is handed (handedInput). */
  results: Map<string, ToolResultContent>;
  /**
   * How the SDK treats each function tool's own approval policy, learnt once a run has a refused or renamed call
   * (learnPolicies): whether it asks a person for a call whose arguments are not JSON, and (where it does not) the
   * policy's one answer.
   */
  policies: Map<Tool, ApprovalPolicy>;
  /** The run's context, where a call the SDK is to answer asking no one is approved before the run sees it (WritingModel). */
  context: RunContext;
  /** The agent the run runs (runningAgent): the context keeps decisions by it. */
  agent?: Agent<any, any>;
}

/** Stores a call's result, and keeps it as the log holds it (TurnWriter.result) for the run's next model call (handedInput). */
async function storeResult(turn: TurnWriter, calls: RunCalls, sentId: string, call: { id: string; name: string }, result: ToolResultContent): Promise<void> {
  calls.results.set(sentId, await turn.result(call, result.status, result.content));
}

/**
 * A model request with each result of the run's calls as the log holds it, in the form a request built from the log
 * hands it (handedResultText: an error's text marked `Error: `). The SDK hands the model a failed call's text as a
 * plain output (a thrown tool's errorFunction answer, its parse error for arguments that are not JSON, a guardrail's
 * rejection): a fork or a later turn, built from the log, would otherwise send the model something else than this
 * run did (docs/runners.md, "What a tool hands back").
 */
function handedInput(request: AgentsModelRequest, calls: RunCalls): AgentsModelRequest {
  if (typeof request.input === 'string' || calls.results.size === 0) return request;
  const input = (request.input as Item[]).map((item) => {
    const stored = item.type === 'function_call_result' ? calls.results.get(item.callId) : undefined;
    return stored ? ({ ...item, output: { type: 'text', text: handedResultText(stored) } } as Item) : item;
  });
  return { ...request, input: input as AgentsModelRequest['input'] };
}

/** How the SDK treats a function tool's own approval policy (docs/runners.md, "A call the model gets wrong"). */
interface ApprovalPolicy {
  /** The SDK asks a person for a call it cannot parse: the policy is a function of the call, not `tool()`'s flag. */
  asksUnparsed: boolean;
  /** Where it does not: the policy's answer, the same for every call. */
  answer: boolean;
}

/** What the SDK does with each policy, once learnt (a policy is a function: each is asked once per process). */
const approvalPolicies = new WeakMap<object, Promise<ApprovalPolicy>>();

/**
 * How the SDK treats `t`'s approval policy. The SDK decides by the policy's kind, which it keeps to itself: a flag
 * given to its `tool()` is answered without the call (so a call whose arguments are not JSON gets its parse error),
 * a function is not (so such a call is asked for a person's decision). The adapter asks the SDK itself, through its
 * public API: a run of its own, on a model answering one call of the tool with arguments that are not JSON, running
 * nothing (the tool's `invoke` is a stub), stops for a decision or answers it.
 */
function approvalPolicyOf(t: FunctionTool): Promise<ApprovalPolicy> {
  let known = approvalPolicies.get(t.needsApproval);
  if (!known) {
    known = probeApprovalPolicy(t);
    approvalPolicies.set(t.needsApproval, known);
  }
  return known;
}

async function probeApprovalPolicy(t: FunctionTool): Promise<ApprovalPolicy> {
  let answers = 0;
  const message = (output: unknown[]) => ({ usage: new Usage(), output }) as ModelResponse;
  const model: Model = {
    getResponse: async () =>
      message(
        answers++ === 0
          ? [{ type: 'function_call', callId: 'forkline_probe', name: t.name, arguments: '{', status: 'completed' }]
          : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }],
      ),
    getStreamedResponse: () => {
      throw new Error('the approval probe runs unstreamed');
    },
  };
  // The probe runs none of the app's code but the policy it learns: the tool's `invoke` is a stub, and so is its
  // `isEnabled` (the app's may have effects, or answer no for an agent it does not know, the probe's).
  const stub: FunctionTool = {
    ...t,
    invoke: async () => '',
    isEnabled: async () => true,
    inputGuardrails: undefined,
    outputGuardrails: undefined,
    timeoutMs: undefined,
  };
  try {
    const probe = new Agent({ name: 'forkline approval probe', model, tools: [stub] });
    const { interruptions } = await new Runner({ tracingDisabled: true }).run(probe, 'probe', { maxTurns: 2 });
    if (interruptions.length > 0) return { asksUnparsed: true, answer: true };
    return { asksUnparsed: false, answer: await t.needsApproval(new RunContext(), {} as never, undefined) };
  } catch {
    // Not learnt: treated as a function of the call (the adapter's own policy is handed to the SDK, as before).
    return { asksUnparsed: true, answer: true };
  }
}

/** Learns how the SDK treats each of the run's function tools' approval policies (approvalPolicyOf), once a run needs it. */
async function learnPolicies(tools: readonly Tool[], calls: RunCalls): Promise<void> {
  for (const t of tools) if (t.type === 'function' && !calls.policies.has(t)) calls.policies.set(t, await approvalPolicyOf(t));
}

/**
 * `model` writing each call through `turn`: the step's start before it, the response (with its calls) before the
 * run sees it. The run is handed each call under the id RunCallIds gives it, so the SDK runs, and sends back to the
 * model, only ids the log's rules allow (docs/runners.md#call-ids).
 */
class WritingModel implements Model {
  /** Whether the last answer made calls: a run that ends after it ended at a tool (its toolUseBehavior), not at an answer. */
  endedAtTool = false;

  constructor(
    private readonly inner: Model,
    private readonly turn: TurnWriter,
    private readonly names: RequestWireNames,
    private readonly calls: RunCalls,
    /** The agent's tools, whose approval policies a run with a refused or renamed call learns (writingTools). */
    private readonly tools: readonly Tool[],
  ) {}

  async getResponse(request: AgentsModelRequest): Promise<ModelResponse> {
    await this.answered(request);
    await this.turn.startStep();
    return this.record(await this.inner.getResponse(handedInput(request, this.calls)));
  }

  async *getStreamedResponse(request: AgentsModelRequest): AsyncIterable<any> {
    await this.answered(request);
    await this.turn.startStep();
    /** Whether the model streams Chat Completions chunks, and whether one said why the answer ended. */
    let chatChunks = false;
    let finished = false;
    for await (const event of this.inner.getStreamedResponse(handedInput(request, this.calls))) {
      if (event.type === 'output_text_delta' && event.delta) void this.turn.delta(event.delta);
      if (event.type === 'model' && event.providerData?.rawModelEventSource === OPENAI_CHAT_COMPLETIONS_RAW_MODEL_EVENT_SOURCE) {
        chatChunks = true;
        if ((event.event?.choices ?? []).some((c: { finish_reason?: string | null }) => c.finish_reason)) finished = true;
      }
      // The SDK's Chat Completions model answers a stream that ended before the provider said why (a connection cut
      // between chunks) as if it were whole, and runs its calls. Forkline's own agent takes such an answer as a
      // connection lost mid-answer: none of its calls runs, and the turn fails (docs/agents.md#models). So here.
      if (event.type === 'response_done' && chatChunks && !finished) throw new Error(INCOMPLETE_ANSWER);
      yield event.type === 'response_done' ? { ...event, response: await this.record(event.response as unknown as ModelResponse) } : event;
    }
  }

  /**
   * Stores the results the SDK answered calls with itself, without the `invoke` the adapter wraps (arguments that
   * are not JSON: its parse error), as the model is handed them, before it is (the next request's input, or the
   * run's items where it stops): a later request and a fork, built from the log, hand the model the same.
   */
  async answered(request: { input: AgentsModelRequest['input'] }): Promise<void> {
    if (!this.calls.unanswered.size || typeof request.input === 'string') return;
    for (const item of request.input as Item[]) {
      const call = item.type === 'function_call_result' ? this.calls.unanswered.get(item.callId) : undefined;
      if (!call) continue;
      this.calls.unanswered.delete(item.callId);
      await storeResult(this.turn, this.calls, item.callId, call, { status: 'error', content: outputText(item.output) });
    }
  }

  /** Stores the response (a call that cannot run with its `error` result) and answers it as the run is to see it. */
  private async record(response: ModelResponse): Promise<ModelResponse> {
    const message = stepMessage(response, this.names);
    const admitted = this.calls.ids.admit(message.toolCalls, this.turn.turn, this.turn.step);
    await this.turn.message({ ...message, toolCalls: admitted });
    if (admitted.some((c) => c.sentId !== c.id)) this.calls.renamed = true;
    for (const call of admitted) {
      if (call.refused === undefined) {
        this.calls.unanswered.set(call.sentId, call);
        continue;
      }
      this.calls.refused.set(call.sentId, call.refused);
      // Arguments that are not JSON: the SDK answers the call itself, with its parse error, never reaching the
      // `invoke` that hands the model the refusal; that answer is stored as it is handed on (answered), as for
      // any such call.
      if (!parsesAsJson(call.arguments)) {
        this.calls.unanswered.set(call.sentId, call);
        continue;
      }
      await storeResult(this.turn, this.calls, call.sentId, call, { status: 'error', content: call.refused });
    }
    // Before the run sees the calls: which policy each tool hands the SDK now depends on it (writingTools).
    const unparsed = admitted.some((c) => !parsesAsJson(c.arguments));
    if (this.calls.refused.size > 0 || this.calls.renamed || unparsed) await learnPolicies(this.tools, this.calls);
    this.endedAtTool = admitted.length > 0;
    let n = 0;
    const output = (response.output as Item[]).map((i) => (i.type === 'function_call' ? { ...i, callId: admitted[n++].sentId } : i));
    if (unparsed) this.answerUnasked(admitted, output);
    return { ...response, output } as ModelResponse;
  }

  /**
   * A call whose arguments are not JSON is answered by the SDK with its parse error, asking no one, under a tool whose
   * own policy is a flag (`needsApproval: true`, or none); under a function it asks a person, for it cannot evaluate
   * the function (docs/runners.md, "A call the model gets wrong"). The adapter hands the SDK a function of its own
   * where the session gates the tool or a call is refused (writingTools), so such a call is approved in the run's
   * context before the run sees it: the SDK answers it with the parse error, as it would under the tool's own flag.
   * So is a refused one (answered already, never asked), whatever the tool's policy.
   */
  private answerUnasked(admitted: readonly AdmittedCall[], output: Item[]): void {
    const items = output.filter((i) => i.type === 'function_call');
    admitted.forEach((call, k) => {
      if (parsesAsJson(call.arguments) || !this.calls.agent) return;
      const t = this.tools.find((x) => x.type === 'function' && x.name === call.name);
      const flagged = t !== undefined && this.calls.policies.get(t)?.asksUnparsed === false;
      if (call.refused !== undefined || flagged)
        this.calls.context.approveTool(new RunToolApprovalItem(items[k] as ConstructorParameters<typeof RunToolApprovalItem>[0], this.calls.agent));
    });
  }
}

/** A tool's output as its result: the SDK's text outputs as text, anything else as JSON (one with no JSON form: an `error` result saying the tool ran). */
function resultOf(output: unknown, maxBytes: number): ToolResultContent {
  let text: unknown;
  try {
    text = outputText(output);
  } catch {
    // not JSON: toolResultContent says so
  }
  return toolResultContent(typeof text === 'string' ? text : output, maxBytes);
}

/** What running a call came to: the result to store (and hand the model), and the error that then stops the run, if any. */
interface CallOutcome {
  result: ToolResultContent;
  /** The model reads this: the output as the tool returned it when it is stored as it is, else the stored text. */
  output: unknown;
  /** Thrown after the result is stored: the run stops (a guardrail's tripwire, a timeout that raises, a tool error the SDK raises). */
  raise?: unknown;
}

/**
 * Runs `invoke` with the SDK's current span watched for a tool's failure. A function tool (the SDK's `tool()`) whose
 * execute throws answers with its errorFunction's text as a plain output; the one sign of the failure outside the tool
 * is the `setError` it calls on the current span (the thrown error itself goes to the errorFunction alone, and the
 * SDK's trace redacts it). The span is the run's own (a proxy that only sees `setError` go by), or a no-op one
 * outside a run (a call taken up after a decision).
 */
function watchingFailure<T>(invoke: () => T, failed: () => void): T {
  const context = getCurrentTraceContext();
  const span: object = context?.span ?? new NoopSpan({ type: 'custom', name: 'forkline tool call', data: {} }, undefined as never);
  const watched = new Proxy(span, {
    // Read and set on the span itself (its fields are private).
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      const bound = value.bind(target);
      return key === 'setError' ? (...args: unknown[]) => (failed(), bound(...args)) : bound;
    },
    set: (target, key, value) => Reflect.set(target, key, value, target),
  });
  return withTraceContext({ trace: context?.trace ?? new NoopTrace(), span: watched as NoopSpan<any> }, invoke);
}

const said = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Runs one call of a function tool as the SDK's own run would — its input
 * guardrails, its `invoke` under its `timeoutMs` (the SDK's invokeFunctionTool),
 * its output guardrails — and says what to record: what the model reads, so
 * the log holds exactly that (docs/runners.md, "What a tool hands back"). The
 * tool handed to the SDK has none of these of its own (writingTools): the SDK
 * would otherwise change the result after it was stored (an output guardrail's
 * rejection, a timeout's message while the tool still runs) or answer a call
 * with no `invoke` at all (an input guardrail's rejection).
 */
async function runCall(
  agent: Agent<any, any>,
  t: FunctionTool,
  ctx: RunContext<any>,
  input: string,
  details: Parameters<FunctionTool['invoke']>[2],
  session: RunnerSession,
): Promise<CallOutcome> {
  const toolCall = details?.toolCall ?? { type: 'function_call' as const, callId: '', name: t.name, arguments: input, status: 'completed' as const };
  try {
    const verdict = await runToolInputGuardrails({ guardrails: t.inputGuardrails, context: ctx, agent, toolCall });
    // Rejected before it ran: the model reads the rejection, and so does the log.
    if (verdict.type === 'reject') return { result: { status: 'error', content: verdict.message }, output: verdict.message };
  } catch (err) {
    return { result: { status: 'error', content: `the call did not run: its input guardrail stopped the run (${said(err)})` }, output: undefined, raise: err };
  }
  // The tool's own invoke, under its timeout as the SDK sets it: a timeout answers while the tool may still run
  // (its execute is not stopped: the SDK aborts the signal it was given and answers without waiting).
  let signal: AbortSignal | undefined;
  let failed = false;
  const invoke: FunctionTool['invoke'] = (c, i, d) => {
    signal = d?.signal;
    session.assertHeld(); // the check at the act: a lease run out meanwhile (a pause: GC, SIGSTOP) runs nothing
    return watchingFailure(
      () => t.invoke(c, i, d),
      () => (failed = true),
    );
  };
  const timedOut = (message: string): ToolResultContent => ({
    status: 'error',
    content: `${message} The tool may have run, and may still be running: its effect is unknown.`,
  });
  let output: unknown;
  try {
    output = await invokeFunctionTool({ tool: { ...t, invoke }, runContext: ctx, input, details });
  } catch (err) {
    if (err instanceof ToolTimeoutError) return { result: timedOut(err.message), output: undefined, raise: err };
    return { result: { status: 'error', content: `tool failed: ${said(err)}` }, output: undefined, raise: err };
  }
  if (signal?.aborted && signal.reason instanceof ToolTimeoutError) {
    const result = timedOut(typeof output === 'string' ? output : signal.reason.message);
    return { result, output: result.content };
  }
  try {
    output = await runToolOutputGuardrails({ guardrails: t.outputGuardrails, context: ctx, agent, toolCall, toolOutput: output });
  } catch (err) {
    // The output is what the guardrail keeps from the model: it is not stored either.
    return {
      result: { status: 'error', content: `the tool ran, but its output guardrail stopped the run (${said(err)}): its output is not recorded` },
      output: undefined,
      raise: err,
    };
  }
  const result = resultOf(output, session.maxResultBytes);
  // The model reads what the log holds: an output that could not be stored is the error that says so.
  const outcome = { result, output: result.status === 'ok' ? output : result.content };
  // A tool that threw, answered by its errorFunction: the model reads that answer as it would without forkline, and
  // the log holds it as the failure it is (status `error`, as forkline's own agent records a thrown tool).
  return failed ? { ...outcome, result: { ...result, status: 'error' } } : outcome;
}

/**
 * The function tools with each call run by runCall and its result stored as
 * soon as it is known; a tool the session asks a decision for
 * (approvalRequired) needs approval as one the app marked (`needsApproval`).
 * Their guardrails and timeout are runCall's, not the SDK's.
 */
function writingTools(
  agent: Agent<any, any>,
  tools: Tool[],
  turn: TurnWriter,
  request: ModelRequest,
  names: RequestWireNames,
  calls: RunCalls,
): Array<{ offered: Tool; own: Tool }> {
  // Each function tool under the name it is offered by (docs/runners.md#wire-names); its calls are recorded, and
  // shown to its own code and guardrails, under its own. Of two whose forms meet only the first is offered.
  return tools.flatMap((t): Array<{ offered: Tool; own: Tool }> => {
    if (t.type !== 'function') return [{ offered: t, own: t }];
    if (!names.offers(t.name)) return [];
    const invoke: FunctionTool['invoke'] = async (ctx, input, wireDetails) => {
      const sentId = wireDetails?.toolCall?.callId ?? '';
      // A call stored with its refusal (an id the log cannot hold, another call's of its answer) never runs: the model reads why.
      const refusal = calls.refused.get(sentId);
      if (refusal !== undefined) return refusal;
      // Its own code and guardrails see it as the log holds it: under the tool's own name and the recorded id.
      const details = wireDetails?.toolCall ? { ...wireDetails, toolCall: recordedCall(wireDetails.toolCall, calls.ids, names) } : wireDetails;
      const call = { id: calls.ids.recorded(sentId), name: t.name };
      calls.unanswered.delete(sentId);
      // Cancelled (or the lease lost) after the call was stored, before the tool started: it does not run, and its result says so.
      if (details?.signal?.aborted) {
        const reason: unknown = details.signal.reason;
        await turn.result(call, 'error', cancelledBeforeStart(reason)).catch(() => {});
        throw reason;
      }
      const outcome = await runCall(agent, t, ctx, input, details, turn.session);
      await storeResult(turn, calls, sentId, call, outcome.result);
      if (outcome.raise !== undefined) throw outcome.raise;
      return outcome.output as string;
    };
    const gated = sessionRequiresApproval(request, t.name);
    // A refused call is answered already: it is never asked for.
    const adapted: FunctionTool['needsApproval'] = async (ctx, input, callId) =>
      !calls.refused.has(callId ?? '') && (gated || t.needsApproval(ctx, input, callId === undefined ? undefined : calls.ids.recorded(callId)));
    const offered = { ...t, name: names.wireName(t.name), invoke, timeoutMs: undefined, inputGuardrails: undefined, outputGuardrails: undefined };
    // The SDK treats a policy of its own `tool()` given a flag (`needsApproval: true`, or none) unlike a function: a
    // call whose arguments are not JSON is answered with the SDK's parse error under the former, and asked for a
    // person's decision under the latter (docs/runners.md, "A call the model gets wrong"). So the tool's own policy is
    // handed on wherever it answers as the adapter's would: always while there is nothing to adapt, and, in a run with
    // a refused or renamed call, where it is a flag (the id it is given is never read) that says no (a refused call is
    // not asked). Elsewhere the adapter's, a function: the session gates the tool, the tool's own is a function (the
    // SDK asks for such a call either way), or a flag saying yes in a run with a refused call.
    const handed = (): FunctionTool['needsApproval'] => {
      if (gated) return adapted;
      if (calls.refused.size === 0 && !calls.renamed) return t.needsApproval;
      const policy = calls.policies.get(t);
      if (!policy || policy.asksUnparsed) return adapted;
      return policy.answer && calls.refused.size > 0 ? adapted : t.needsApproval;
    };
    Object.defineProperty(offered, 'needsApproval', { get: handed, enumerable: true });
    return [{ offered: offered as FunctionTool, own: t }];
  });
}

/** A call as the SDK hands it on (its wire name and id) as the log holds it: under its tool's own name and the recorded id. */
function recordedCall<C extends { name: string; callId: string }>(call: C, ids: RunCallIds, names: RequestWireNames): C {
  return { ...call, name: names.toolOf(call.name), callId: ids.recorded(call.callId) };
}

/**
 * The app's own agent as the adapter's run sees it (docs/runners.md, "The app's own hooks"): an object whose
 * prototype is that agent, with the run's model, settings, tools and tool-use behaviour of its own. Everything else
 * is read from the app's agent as it is when the run reads it — what the app set on it after construction, a
 * subclass's methods (its getSystemPrompt), its listeners — none of which a clone (`agent.clone`: a new plain Agent
 * built from its fields) keeps. The lifecycle events the run emits on it reach the app's listeners with what a run
 * without forkline hands them: the app's agent, the app's own tool (not the wrapper the run offers), each call
 * under its tool's own name and the id the log holds (as the tool's own code sees it).
 */
function runningAgent(
  agent: Agent<any, any>,
  own: Pick<Agent<any, any>, 'model' | 'modelSettings' | 'tools' | 'toolUseBehavior'>,
  appTools: ReadonlyMap<Tool, Tool>,
  asRecorded: (call: { name: string; callId: string }) => { name: string; callId: string },
): Agent<any, any> {
  const appValue = (value: unknown): unknown => {
    if (value === running) return agent;
    const tool = appTools.get(value as Tool);
    if (tool) return tool;
    // A tool event's details ({toolCall}): the call as the log holds it.
    const call = (value as { toolCall?: { type?: string; name: string; callId: string } } | undefined)?.toolCall;
    return call?.type === 'function_call' ? { ...(value as object), toolCall: asRecorded(call) } : value;
  };
  const running: Agent<any, any> = Object.create(agent);
  Object.assign(running, own, {
    // The MCP servers' tools are among `tools`, wrapped: the run lists no server of its own (and no handoff: unrecordableOf).
    mcpServers: [],
    handoffs: [],
    emit: (type: string, ...args: unknown[]) => (agent.emit as (type: string, ...args: unknown[]) => boolean).call(agent, type, ...args.map(appValue)),
  });
  return running;
}

/** The calls a run stopped at for a person's decision (its interruptions: needsApproval), by the ids they are recorded under. */
const interruptedCalls = (interruptions: ReadonlyArray<{ rawItem?: unknown }>, ids: RunCallIds) =>
  interruptions.flatMap((i) => {
    const id = (i.rawItem as { callId?: string } | undefined)?.callId;
    return id ? [{ id: ids.recorded(id) }] : [];
  });

const parseArguments = (text: string): unknown => {
  try {
    return JSON.parse(text || '{}');
  } catch {
    return {};
  }
};

/**
 * A call of the open step taken up after a person's decision (settleOpenCalls),
 * run outside the SDK's loop as the SDK's run would run it (runCall: its
 * guardrails, its input checked against its parameters, its timeout), its
 * output stored as the SDK's runs are.
 */
async function runDecided(
  agent: Agent<any, any>,
  tools: readonly Tool[],
  call: RunnerToolCall,
  session: RunnerSession,
  signal: AbortSignal,
): Promise<ToolResultContent> {
  const t = tools.find((x): x is FunctionTool => x.type === 'function' && x.name === call.name);
  if (!t) return { status: 'error', content: 'the runner has no such tool' };
  if (signal.aborted) return { status: 'error', content: cancelledBeforeStart(signal.reason) };
  const toolCall = { type: 'function_call' as const, callId: call.id, name: call.name, arguments: call.arguments, status: 'completed' as const };
  return (await runCall(agent, t, new RunContext(), call.arguments, { toolCall, signal }, session)).result;
}

/** Whether the agent's function tool asks for a person's decision on this call (its `needsApproval`). */
async function toolNeedsApproval(tools: readonly Tool[], call: RunnerToolCall, request: ModelRequest): Promise<boolean> {
  if (sessionRequiresApproval(request, call.name)) return true;
  const t = tools.find((x): x is FunctionTool => x.type === 'function' && x.name === call.name);
  return t ? t.needsApproval(new RunContext(), parseArguments(call.arguments) as never, call.id) : false;
}

async function modelFor(agent: Agent<any, any>, requested: RequestedModel | undefined, opts: AgentsRunOptions): Promise<Model | undefined> {
  const named = requested ? opts.resolveModel?.(requested) : agent.model;
  if (named === undefined) return undefined;
  if (typeof named !== 'string') return named;
  return (opts.modelProvider ?? new OpenAIProvider()).getModel(named || undefined);
}

/** Runs the session's work with an Agents SDK agent: one run per pending input (or the rest of an open turn), each step written as it happens. */
export async function runAgentsTurns(session: RunnerSession, agent: Agent<any, any>, opts: AgentsRunOptions = {}): Promise<number> {
  const declared = agentsToolDeclarations(await agentsTools(agent), opts.effects);
  await session.declareTools(declared);
  // A tool providers refuse by its own name has its form in a request only once the session holds the declaration.
  if (needsWireNames(declared.map((t) => t.name))) await session.storeDeclaredTools();
  let turns = 0;
  let compacting = opts.compact ?? true;
  for (;;) {
    const request = await session.modelRequest();
    const model = compacting && request.compaction ? await modelFor(agent, requestedModel(request), opts) : undefined;
    if (model && request.compaction) {
      // Over the budget: the session's model summarises first (a failed summary is not tried again in this claim).
      compacting = await writeRunnerCompaction(session, request.compaction, (messages) => summarizeWith(model, messages, session.signal));
      continue;
    }
    if (request.turn == null || request.step == null || opts.signal?.aborted) return turns;
    // A call still awaits a person's decision (a claim of a WAITING session): nothing runs until it is decided.
    if (request.openCalls.some((c) => c.approval === 'pending')) return turns;
    await runAgentsTurn(session, request, agent, opts);
    turns++;
  }
}

/** A summary of `messages` by the Agents SDK model: one response, no tools (in a trace of its own, as a run's calls are). */
async function summarizeWith(model: Model, messages: ChatMessage[], signal: AbortSignal): Promise<string> {
  const response = await withTrace('forkline compaction', () =>
    model.getResponse({
      input: [{ role: 'user', content: summaryPrompt(messages) }],
      modelSettings: {},
      tools: [],
      outputType: 'text',
      handoffs: [],
      tracing: false,
      signal,
    }),
  );
  const { text } = stepMessage(response);
  if (!text.trim()) throw new Error('the model answered the summary request with no text');
  return text;
}

/** One turn (or the rest of an open one) from `request`. */
export async function runAgentsTurn(session: RunnerSession, request: ModelRequest, agent: Agent<any, any>, opts: AgentsRunOptions = {}): Promise<void> {
  let turn = session.turn(request);
  const requested = requestedModel(request);
  const model = await modelFor(agent, requested, opts);
  if (!model) return turn.end('failed', unservableModel(requested, !!opts.resolveModel));
  const tools = await agentsTools(agent);
  const unrecordable = unrecordableOf(agent, tools);
  if (unrecordable) return turn.end('failed', unrecordable);
  const signal = opts.signal ? AbortSignal.any([session.signal, opts.signal]) : session.signal;
  /** The function tools' names on the wire, and back (docs/runners.md#wire-names): a name's form depends on the name alone. */
  const names = new RequestWireNames(
    request,
    tools.filter((t) => t.type === 'function').map((t) => t.name),
  );
  // Only the tools the model is offered run: one whose form another took is never run by a call naming it.
  const offered = tools.filter((t) => t.type !== 'function' || names.offers(t.name));
  // A step taken up after a person's decision: its calls are settled from the log, then the turn goes on from the next step.
  const decided = request;
  const resumed = await resumeDecidedStep(session, turn, request, {
    run: (call) => runDecided(agent, offered, call, session, signal),
    needsApproval: (call) => toolNeedsApproval(offered, call, decided),
  });
  if (!resumed) return;
  ({ request, turn } = resumed);
  const modelSettings: ModelSettings = { ...agent.modelSettings, ...agentsModelSettings(requested?.settings) };
  const { toolChoice } = modelSettings;
  if (toolChoice && toolChoice !== 'auto' && toolChoice !== 'required' && toolChoice !== 'none') modelSettings.toolChoice = names.wireName(toolChoice);
  const behavior = agent.toolUseBehavior;
  const calls: RunCalls = {
    ids: new RunCallIds(request.messages as ChatMessage[]),
    refused: new Map(),
    renamed: false,
    unanswered: new Map(),
    results: new Map(),
    policies: new Map(),
    context: new RunContext(),
  };
  const writer = new WritingModel(model, turn, names, calls, offered);
  const wrapped = writingTools(agent, tools, turn, request, names, calls);
  const writing = runningAgent(
    agent,
    {
      model: writer,
      modelSettings,
      tools: wrapped.map((t) => t.offered),
      // The SDK matches the tools a run stops at by the names it offered them under.
      toolUseBehavior:
        typeof behavior === 'object' && 'stopAtToolNames' in behavior ? { stopAtToolNames: behavior.stopAtToolNames.map((n) => names.wireName(n)) } : behavior,
    },
    new Map(wrapped.map((t) => [t.offered, t.own])),
    (call) => recordedCall(call, calls.ids, names),
  );
  // The run's settings (the session's over the agent's own) go in as the run's (RunConfig.modelSettings) as well as the
  // running agent's: the SDK sends an agent's only when they were given to its constructor, and the app's agent may
  // have been built without any. Both hold the same settings: the provider is sent them as they are (docs/runners.md).
  calls.agent = writing;
  const runner = new Runner({ modelSettings });
  const memory = new ForklineAgentsSession(session, request);
  const input = [...(await memory.getItems()), ...(memory.input !== undefined ? [{ role: 'user', content: memory.input } as AgentInputItem] : [])];
  let failure: unknown;
  try {
    const options = { maxTurns: opts.maxTurns ?? 16, signal, context: calls.context };
    let interruptions: ReadonlyArray<{ rawItem?: unknown }>;
    let finalOutput: unknown;
    let newItems: ReadonlyArray<{ rawItem?: unknown }>;
    if (opts.stream === false) {
      ({ interruptions, finalOutput, newItems } = await runner.run(writing, input, options));
    } else {
      const result = await runner.run(writing, input, { ...options, stream: true });
      for await (const _event of result) void _event;
      await result.completed;
      if (result.error) failure = result.error;
      ({ interruptions, finalOutput, newItems } = result);
    }
    // The run stopped (for a decision, at a tool) after answering calls itself, with no model call to hand them to.
    await writer.answered({ input: newItems.map((i) => i.rawItem as AgentInputItem) });
    // A run that ended at a tool (toolUseBehavior: stop_on_first_tool, stopAtToolNames, a function's final output) answered
    // with that output: it is the turn's answer, stored as the step's last model/message (docs/runners.md, "A turn's answer").
    if (!failure && interruptions.length === 0 && writer.endedAtTool && finalOutput !== undefined)
      await turn.message({ text: typeof finalOutput === 'string' ? finalOutput : JSON.stringify(finalOutput), toolCalls: [] });
    // The run stopped for a person's decision (a tool's needsApproval): the calls are asked in the log, not run, and the lease goes back with it.
    if (!failure && interruptions.length > 0) {
      const asked = interruptedCalls(interruptions, calls.ids);
      if (asked.length < interruptions.length)
        failure = new Error('the run stopped for an approval of something other than a function call, which @forkline/openai-agents does not ask for');
      else await turn.requestApproval(asked);
    }
  } catch (err) {
    failure = err;
  }
  if (turn.isEnded || (turn.isWaiting && !failure)) return;
  if (session.signal.aborted) throw failure ?? session.signal.reason; // the lease is gone: nothing more is ours to write
  if (opts.signal?.aborted && !turn.isEnded) {
    // Cancelled by the app: the SDK's run ends without an error (a streamed one as if it were done), having waited for
    // the tools it started; the calls it never started say so, and the turn fails, whatever the run answered.
    failure = opts.signal.reason;
    await turn.cancelUnstarted(failure);
  }
  await turn.end(failure ? 'failed' : 'completed', failure ? (failure instanceof Error ? failure.message : String(failure)) : undefined);
}
