// OpenAI Agents SDK adapter for external runners: a `Session`
// (the SDK's conversation memory) backed by a claimed forkline session.
// getItems returns the conversation forkline builds (Session.modelRequest:
// a fork's synthetic results with their wording, compaction summaries) as
// agent input items; addItems writes what the run adds as forkline events —
// the user input opens the turn (inbox/remove, turn/start), each model
// response is a step (step/start, model/message with its function calls),
// each function_call_result a tool/result — and endTurn closes it. A forkline
// log is append-only: popItem and clearSession never remove stored events
// (fork the session to go back).
//
//   await runner.run((s) => runAgentsTurns(s, agent));
import { run, type Agent, type AgentInputItem, type Session } from '@openai/agents';
import type { ChatMessage, ModelRequest, RunnerEvent, RunnerSession } from '../runner.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the SDK's item union read loosely, field by field
type Item = AgentInputItem & Record<string, any>;

/** ModelRequest.messages (OpenAI chat format) as agent input items. */
export function toAgentItems(messages: readonly ChatMessage[]): AgentInputItem[] {
  const names = new Map<string, string>();
  const out: Item[] = [];
  for (const m of messages) {
    if (m.role === 'system') out.push({ role: 'system', content: m.content } as Item);
    else if (m.role === 'user') out.push({ role: 'user', content: m.content } as Item);
    else if (m.role === 'assistant') {
      if (m.content) out.push({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: m.content }] } as Item);
      for (const c of m.tool_calls ?? []) {
        names.set(c.id, c.function.name);
        out.push({ type: 'function_call', callId: c.id, name: c.function.name, arguments: c.function.arguments, status: 'completed' } as Item);
      }
    } else if (m.role === 'tool') {
      out.push({ type: 'function_call_result', callId: m.tool_call_id, name: names.get(m.tool_call_id) ?? 'unknown', status: 'completed', output: { type: 'text', text: m.content } } as Item);
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

export class ForklineAgentsSession implements Session {
  /** Items this run added (getItems returns them after the history). */
  private readonly added: AgentInputItem[] = [];
  private readonly history: AgentInputItem[];
  private turnOpen: boolean;
  private step: number;
  private stepOpen = false;
  /** The open step's model response, not written yet: function calls may still join it. */
  private draft?: { text: string; toolCalls: Array<{ id: string; name: string; arguments: string }> };
  private stepHasResults = false;

  constructor(
    private readonly session: RunnerSession,
    private readonly request: ModelRequest,
  ) {
    const messages = request.messages as ChatMessage[];
    // Outside an open turn the last message is the pending input: the run gives it as its input.
    this.history = toAgentItems(request.inTurn ? messages : messages.slice(0, -1));
    this.turnOpen = request.inTurn;
    this.step = (request.step ?? 1) - 1;
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
    const events: RunnerEvent[] = [];
    const turn = this.request.turn!;
    for (const item of items as Item[]) {
      this.added.push(item);
      if (item.role === 'user') {
        if (!this.turnOpen) {
          events.push({ type: 'inbox/remove', data: { inputId: this.request.inputId, reason: 'taken' } });
          events.push({ type: 'turn/start', data: { turn, inputId: this.request.inputId } });
          this.turnOpen = true;
        }
      } else if (item.role === 'assistant' || item.type === 'function_call') {
        // A new model response: a new step, unless it continues the response being drafted.
        if (!this.draft || this.stepHasResults || (item.role === 'assistant' && (this.draft.text || this.draft.toolCalls.length))) {
          events.push(...this.flush(turn), ...this.closeStep(turn));
          this.step++;
          this.stepOpen = true;
          this.stepHasResults = false;
          events.push({ type: 'step/start', data: { turn, step: this.step } });
          this.draft = { text: '', toolCalls: [] };
        }
        if (item.role === 'assistant') this.draft!.text += messageText(item);
        else this.draft!.toolCalls.push({ id: item.callId, name: item.name, arguments: item.arguments ?? '{}' });
      } else if (item.type === 'function_call_result') {
        events.push(...this.flush(turn));
        this.stepHasResults = true;
        events.push({
          type: 'tool/result',
          data: { turn, step: this.step, callId: item.callId, resultId: `res_${this.session.sessionId}_${item.callId}`, status: item.status === 'incomplete' ? 'error' : 'ok', content: outputText(item.output), name: item.name },
        });
      }
    }
    // A model response is written once its items are in (its calls before their results).
    events.push(...this.flush(turn));
    if (events.length) await this.session.append(events);
  }

  private flush(turn: number): RunnerEvent[] {
    if (!this.draft) return [];
    const d = this.draft;
    this.draft = undefined;
    return [{ type: 'model/message', data: { turn, step: this.step, text: d.text, toolCalls: d.toolCalls } }];
  }

  private closeStep(turn: number): RunnerEvent[] {
    if (!this.stepOpen) return [];
    this.stepOpen = false;
    return [{ type: 'step/end', data: { turn, step: this.step, reason: 'completed' } }];
  }

  /** Closes the turn (its open step first): `completed`, or `failed` with the error recorded. */
  async endTurn(reason: 'completed' | 'failed', error?: string): Promise<void> {
    const turn = this.request.turn!;
    const events: RunnerEvent[] = [];
    if (!this.turnOpen) {
      // The run ended before its input was stored: the input is taken all the same (or it would be run again and again).
      if (this.request.inTurn || turn == null) return;
      events.push({ type: 'inbox/remove', data: { inputId: this.request.inputId, reason: 'taken' } }, { type: 'turn/start', data: { turn, inputId: this.request.inputId } });
    }
    events.push(...this.flush(turn), ...this.closeStep(turn));
    if (error) events.push({ type: 'plugin/agent/error', data: { turn, step: Math.max(1, this.step), message: error } });
    events.push({ type: 'turn/end', data: { turn, reason } });
    this.turnOpen = false;
    await this.session.append(events);
  }

  /** The last item; stored events stay (the log is append-only): only an item of this run not yet written is dropped. */
  async popItem(): Promise<AgentInputItem | undefined> {
    return this.added.pop() ?? this.history.at(-1);
  }

  async clearSession(): Promise<void> {
    throw new Error(`forkline session ${this.session.sessionId} is an append-only log: fork it (forkSession) to start again from an earlier point`);
  }
}

/** Runs the session's work with an Agents SDK agent: one run per pending input (or the rest of an open turn). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any agent, whatever its context and output types
export async function runAgentsTurns(session: RunnerSession, agent: Agent<any, any>, opts: { maxTurns?: number } = {}): Promise<number> {
  let turns = 0;
  for (;;) {
    const request = await session.modelRequest();
    if (request.turn == null) return turns;
    const memory = new ForklineAgentsSession(session, request);
    try {
      await run(agent, memory.input ?? [], { session: memory, maxTurns: opts.maxTurns ?? 16 });
      await memory.endTurn('completed');
    } catch (err) {
      if (session.signal.aborted) throw err;
      await memory.endTurn('failed', err instanceof Error ? err.message : String(err));
    }
    turns++;
  }
}
