// Automatic compaction with the runner's own model (docs/runners.md,
// Compaction): when a request is over the session's budget,
// ModelRequest.compaction holds the history to summarise; the runner's model
// writes the summary and it goes in as forkline's own agent writes it —
// plugin/compaction/start, surface/replace {fromSeq, toSeq, content},
// plugin/compaction/end {…, summarySeq, reason, requests} — so the next
// request holds the summary instead of that history.
import type { ChatMessage, ModelRequest, RunnerSession } from './runner.ts';
import { isRefusal } from './refusal.ts';

export type RunnerCompaction = NonNullable<ModelRequest['compaction']>;
/** Summarises the history (chat messages) with the runner's model: the summary's text. */
export type Summarize = (messages: ChatMessage[], compaction: RunnerCompaction) => Promise<string>;

const START = 'plugin/compaction/start';
const END = 'plugin/compaction/end';

/** A summary request's prompt: the history as a transcript, and what the summary must keep. */
export function summaryPrompt(messages: readonly ChatMessage[]): string {
  const lines = messages.map((m) => {
    switch (m.role) {
      case 'system':
        return `[summary] ${m.content}`;
      case 'user':
        return `[user] ${m.content}`;
      case 'assistant': {
        const calls = (m.tool_calls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`);
        return `[assistant] ${m.content ?? ''}${calls.length ? ` [calls] ${calls.join(' ')}` : ''}`;
      }
      case 'tool':
        return `[tool] ${m.content}`;
    }
  });
  return [
    'Summarise the conversation below.',
    "Write a concise summary that lets the conversation continue: the user's goals, what was decided and done, tool results that matter, open questions.",
    'Conversation:',
    ...lines,
  ].join('\n');
}

/**
 * Writes the compaction a request asked for: its start first (a fork taken
 * while the model summarises inherits an unfinished compaction, which it
 * ignores), then the summary and the end. A failed summary is recorded in the
 * end (`error`) and answers false, as is a summary the server refuses; LeaseLostError goes up.
 */
export async function writeRunnerCompaction(session: RunnerSession, compaction: RunnerCompaction, summarize: Summarize): Promise<boolean> {
  const reason = compaction.reason;
  const span = { fromSeq: compaction.fromSeq, toSeq: compaction.throughSeq };
  await session.append([{ type: START, data: { reason, ...span } }]);
  let text: string;
  try {
    text = await summarize(compaction.messages as ChatMessage[], compaction);
  } catch (err) {
    if (session.signal.aborted) throw err;
    await session.append([{ type: END, data: { reason, ...span, error: (err instanceof Error ? err.message : String(err)).slice(0, 2000) } }]);
    return false;
  }
  let replace;
  try {
    // Postgres text holds no NUL: stored as U+FFFD, as forkline's own agent stores it.
    // eslint-disable-next-line no-control-regex
    [replace] = await session.append([{ type: 'surface/replace', data: { ...span, content: text.replace(/\u0000/g, '\uFFFD') } }]);
  } catch (err) {
    // A summary the server refuses (over its body limit) would be refused again at each claim: a failed compaction instead.
    if (!isRefusal(err) || session.signal.aborted) throw err;
    await session.append([{ type: END, data: { reason, ...span, error: `the server refused the summary: ${err.message}`.slice(0, 2000) } }]);
    return false;
  }
  await session.append([{ type: END, data: { ...span, summarySeq: replace.seq, reason, requests: 1 } }]);
  return true;
}
