// Vercel AI SDK adapter for external runners: runs `streamText`
// (or `generateText`) with the runner's own tools on a claimed session, from
// the model request forkline builds (Session.modelRequest), and writes each
// step as forkline events from `onStepFinish`: step/start, model/message with
// its tool calls, a tool/result per call, step/end — the turn's inbox/remove
// and turn/start go with its first step, its turn/end with its last. Text
// deltas stream to sessionTurns subscribers as they come.
//
//   await runner.run((session) => runAiSdkTurns(session, { model, tools }));
import { generateText, stepCountIs, streamText, type LanguageModel, type ModelMessage, type StepResult, type ToolSet } from 'ai';
import type { ChatMessage, ModelRequest, RunnerEvent, RunnerSession } from '../runner.ts';

export interface AiSdkRunOptions {
  model: LanguageModel;
  /** The runner's tools (AI SDK `tool({...})` with `execute`). */
  tools?: ToolSet;
  /** Steps per turn (default 16); a turn still calling tools after them ends `failed`. */
  maxSteps?: number;
  /** `generate`: generateText, no deltas (default `stream`). */
  mode?: 'stream' | 'generate';
  system?: string;
}

/** ModelRequest.messages (OpenAI chat format, as forkline builds them) as AI SDK model messages. */
export function toModelMessages(messages: readonly ChatMessage[]): ModelMessage[] {
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
          toolNames.set(c.id, c.function.name);
          parts.push({ type: 'tool-call', toolCallId: c.id, toolName: c.function.name, input: parseArguments(c.function.arguments) });
        }
        out.push({ role: 'assistant', content: parts });
        break;
      }
      case 'tool':
        out.push({
          role: 'tool',
          content: [{ type: 'tool-result', toolCallId: m.tool_call_id, toolName: toolNames.get(m.tool_call_id) ?? 'unknown', output: { type: 'text', value: m.content } }],
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

const asText = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value ?? null));

/** One AI SDK step as forkline events (without the turn's opening and closing). */
export function stepEvents(turn: number, step: number, result: StepResult<ToolSet>, sessionId: string): RunnerEvent[] {
  const calls = result.toolCalls.map((c) => ({ id: c.toolCallId, name: c.toolName, arguments: JSON.stringify(c.input ?? {}) }));
  const events: RunnerEvent[] = [
    { type: 'step/start', data: { turn, step } },
    {
      type: 'model/message',
      data: {
        turn,
        step,
        text: result.text,
        toolCalls: calls,
        ...(result.usage?.inputTokens !== undefined ? { usage: { inputTokens: result.usage.inputTokens ?? 0, outputTokens: result.usage.outputTokens ?? 0 } } : {}),
      },
    },
  ];
  for (const call of calls) {
    const ok = result.toolResults.find((r) => r.toolCallId === call.id);
    const failed = result.content.find((p) => p.type === 'tool-error' && p.toolCallId === call.id) as { error?: unknown } | undefined;
    const status = ok ? 'ok' : 'error';
    const content = ok ? asText(ok.output) : failed ? `tool failed: ${failed.error instanceof Error ? failed.error.message : asText(failed.error)}` : 'the runner has no such tool';
    events.push({ type: 'tool/result', data: { turn, step, callId: call.id, resultId: `res_${sessionId}_${call.id}`, status, content, name: call.name } });
  }
  events.push({ type: 'step/end', data: { turn, step, reason: 'completed' } });
  return events;
}

/**
 * Runs the session's work with the AI SDK: an open turn's next steps, then
 * one turn per pending input, until nothing is left (or the lease is lost).
 */
export async function runAiSdkTurns(session: RunnerSession, opts: AiSdkRunOptions): Promise<number> {
  let turns = 0;
  for (;;) {
    const request = await session.modelRequest();
    if (request.turn == null || request.step == null) return turns;
    await runAiSdkTurn(session, request, opts);
    turns++;
  }
}

/** One turn (or the rest of an open one) from `request`. */
export async function runAiSdkTurn(session: RunnerSession, request: ModelRequest, opts: AiSdkRunOptions): Promise<void> {
  const turn = request.turn!;
  let step = request.step!;
  const maxSteps = opts.maxSteps ?? 16;
  // The turn's start goes in with its first step (one append).
  let opening: RunnerEvent[] = request.inTurn
    ? []
    : [
        { type: 'inbox/remove', data: { inputId: request.inputId, reason: 'taken' } },
        { type: 'turn/start', data: { turn, inputId: request.inputId } },
      ];
  let writes: Promise<void> = Promise.resolve();
  let failure: unknown;
  let ended = false;
  const abort = new AbortController();
  session.signal.addEventListener('abort', () => abort.abort(session.signal.reason), { once: true });
  const write = (events: RunnerEvent[]) => {
    writes = writes.then(async () => void (failure ? undefined : await session.append(events))).catch((err) => {
      failure ??= err;
      abort.abort(err);
    });
    return writes;
  };
  const onStepFinish = (result: StepResult<ToolSet>) => {
    const events = [...opening, ...stepEvents(turn, step, result, session.sessionId)];
    opening = [];
    if (result.toolCalls.length === 0) {
      events.push({ type: 'turn/end', data: { turn, reason: 'completed' } });
      ended = true;
    }
    step++;
    return write(events);
  };
  const common = {
    model: opts.model,
    system: opts.system,
    messages: toModelMessages(request.messages as ChatMessage[]),
    tools: opts.tools,
    stopWhen: stepCountIs(maxSteps),
    abortSignal: abort.signal,
    onStepFinish,
  };
  try {
    if (opts.mode === 'generate') {
      await generateText(common);
    } else {
      const result = streamText({ ...common, onError: ({ error }) => void (failure ??= error) });
      let deltaStep = step - 1;
      for await (const part of result.fullStream) {
        if (part.type === 'start-step') deltaStep++;
        else if (part.type === 'text-delta' && part.text) void session.delta(turn, deltaStep, part.text);
      }
    }
  } catch (err) {
    failure ??= err;
  }
  await writes;
  if (failure) {
    if (session.signal.aborted) throw failure; // the lease is gone: nothing more is ours to write
    // The model or a write failed: the turn ends failed, as forkline's runner ends it.
    const message = failure instanceof Error ? failure.message : String(failure);
    await session.append([...opening, { type: 'plugin/agent/error', data: { turn, step, message } }, { type: 'turn/end', data: { turn, reason: 'failed' } }]);
    return;
  }
  if (!ended) {
    await session.append([
      ...opening,
      { type: 'plugin/agent/error', data: { turn, step: step - 1, message: `stopped after ${maxSteps} steps` } },
      { type: 'turn/end', data: { turn, reason: 'failed' } },
    ]);
  }
}
