// History → model request (DESIGN §3.3): the model-visible conversation of a
// log, in OpenAI chat format. Pure.
import type { ChatMessage } from './chat.ts';
import type { EventData, LogEvent } from './events.ts';

/**
 * Builds the conversation from a log:
 * - a user message when a turn starts, with the text of the input it took;
 * - an assistant message per model/message, with its tool calls;
 * - a tool message per tool/result (real or synthetic, with its wording);
 * - a surface/replace hides the events of its range and stands in their place.
 * A call that never got a result (a historical failure in a closed step) is left
 * out of its assistant message: chat APIs reject calls without answers.
 */
export function buildModelMessages(events: readonly LogEvent[], opts: { system?: string } = {}): ChatMessage[] {
  const replacements = new Map<number, { toSeq: number; content: string }>();
  const answered = new Set<string>();
  const inputs = new Map<string, string>();
  for (const e of events) {
    if (e.type === 'surface/replace') {
      const d = e.data as EventData<'surface/replace'>;
      replacements.set(d.fromSeq, { toSeq: d.toSeq, content: d.content });
    } else if (e.type === 'tool/result') answered.add((e.data as EventData<'tool/result'>).callId);
    else if (e.type === 'inbox/add') inputs.set(e.data.inputId, e.data.text);
  }

  const messages: ChatMessage[] = opts.system ? [{ role: 'system', content: opts.system }] : [];
  let hiddenThrough = -1;
  for (const e of events) {
    const replacement = replacements.get(e.seq);
    if (replacement && e.seq > hiddenThrough) {
      messages.push({ role: 'system', content: `Summary of earlier conversation (events ${e.seq}..${replacement.toSeq}):\n${replacement.content}` });
      hiddenThrough = replacement.toSeq;
    }
    if (e.seq <= hiddenThrough) continue;
    switch (e.type) {
      case 'turn/start':
        messages.push({ role: 'user', content: inputs.get(e.data.inputId) ?? '' });
        break;
      case 'model/message': {
        const d = e.data as EventData<'model/message'>;
        const calls = d.toolCalls.filter((c) => answered.has(c.id));
        messages.push({
          role: 'assistant',
          content: d.text === '' && calls.length ? null : d.text,
          ...(calls.length
            ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) }
            : {}),
        });
        break;
      }
      case 'tool/result': {
        const d = e.data as EventData<'tool/result'>;
        messages.push({ role: 'tool', tool_call_id: d.callId, content: d.status === 'error' ? `Error: ${d.content}` : d.content });
        break;
      }
    }
  }
  return messages;
}
