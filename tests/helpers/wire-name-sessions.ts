// What the wire-name tests of the runner SDKs share (docs/runners.md#wire-names):
// a recording whose history calls a tool named as no provider takes it, and
// the Responses answers the OpenAI Agents SDK reads.
import { sse } from './provider-sse.ts';

const at = (seq: number) => new Date(Date.UTC(2026, 11, 6, 10, 0, seq)).toISOString();

/**
 * A runner pool's recording whose turn 1 called `tool` once (`{"path":"a"}`): with the session's model on
 * `provider` and its runner's declared tools `declared` when given.
 */
export function recordingCalling(o: { id: string; pool: string; tool: string; provider?: string; declared?: unknown[] }): string {
  const events: Array<[string, unknown]> = [
    ...(o.provider ? [['session/model', { provider: o.provider, model: 'fake-model' }] as [string, unknown]] : []),
    ...(o.declared ? [['session/runner-tools', { tools: o.declared }] as [string, unknown]] : []),
    ['inbox/add', { inputId: 'in_1', text: 'read a' }],
    ['inbox/remove', { inputId: 'in_1', reason: 'taken' }],
    ['turn/start', { turn: 1, inputId: 'in_1' }],
    ['step/start', { turn: 1, step: 1 }],
    ['model/message', { turn: 1, step: 1, text: '', toolCalls: [{ id: 'call_1', name: o.tool, arguments: '{"path":"a"}' }] }],
    ['tool/result', { turn: 1, step: 1, callId: 'call_1', resultId: 'res_1', status: 'ok', content: 'contents of a', name: o.tool }],
    ['step/end', { turn: 1, step: 1, reason: 'completed' }],
    ['step/start', { turn: 1, step: 2 }],
    ['model/message', { turn: 1, step: 2, text: 'read', toolCalls: [] }],
    ['step/end', { turn: 1, step: 2, reason: 'completed' }],
    ['turn/end', { turn: 1, reason: 'completed' }],
  ];
  const header = { format: 'forkline.recording', version: 4, session: { id: o.id, title: 'odd tool name', runner: o.pool } };
  return [header, ...events.map(([type, data], seq) => ({ seq, type, data, createdAt: at(seq) }))].map((l) => JSON.stringify(l)).join('\n') + '\n';
}

/** A streamed Responses answer whose completed response holds `items` as its output (what the Agents SDK reads). */
export function agentsResponse(...items: Array<Record<string, unknown>>): string[] {
  const response = {
    id: 'resp_1',
    object: 'response',
    created_at: 1,
    model: 'fake-model',
    output: items,
    usage: { input_tokens: 5, output_tokens: 1, total_tokens: 6 },
  };
  return [
    sse({ type: 'response.created', response: { ...response, status: 'in_progress', output: [] } }),
    ...items.map((item, i) => sse({ type: 'response.output_item.done', output_index: i, item })),
    sse({ type: 'response.completed', response: { ...response, status: 'completed' } }),
  ];
}

/** A streamed Responses answer of `text`, for the Agents SDK. */
export const agentsResponseText = (text: string): string[] =>
  agentsResponse({ type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] });
