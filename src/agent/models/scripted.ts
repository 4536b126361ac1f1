// The keyless, deterministic default model. It answers from the request alone,
// so a fork and its parent given the same history answer the same way.
//
// Cues, one per line in the user's message (documented in the README):
//   !call <tool> <json arguments>   call a tool in the current step
//   !then                           start the next step's group of calls
//   !fail <message>                 the model errors (the turn ends failed)
//   !slow <ms>                      wait this long between streamed words
// Without cues it answers `Echo: <text>`. After the last group of calls it
// answers with a summary of the tool results it was given.
import type { ChatMessage, ModelAnswer, ModelRequest } from '../../core/chat.ts';
import type { ToolCall } from '../../core/events.ts';
import { ModelError, type ChatModel, type CompleteOptions } from './model.ts';
import { SAMPLING_SETTINGS } from './settings.ts';

interface Script {
  groups: Array<Array<{ name: string; arguments: string }>>;
  fail?: string;
  slowMs: number;
  text: string;
}

export function parseScript(userText: string): Script {
  const script: Script = { groups: [], slowMs: 0, text: '' };
  let group: Script['groups'][number] = [];
  const prose: string[] = [];
  for (const line of userText.split('\n')) {
    const m = line.trim().match(/^!(call|then|fail|slow)\b\s*(.*)$/);
    if (!m) {
      prose.push(line);
      continue;
    }
    const [, cue, rest] = m;
    if (cue === 'call') {
      const [, name, args] = rest.match(/^(\S+)\s*(.*)$/) ?? [];
      if (name) group.push({ name, arguments: args.trim() || '{}' });
    } else if (cue === 'then') {
      if (group.length) script.groups.push(group);
      group = [];
    } else if (cue === 'fail') script.fail = rest || 'scripted failure';
    else if (cue === 'slow') script.slowMs = Math.max(0, Math.min(10_000, Number(rest) || 0));
  }
  if (group.length) script.groups.push(group);
  script.text = prose.join('\n').trim();
  return script;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => (clearTimeout(t), reject(signal.reason));
    // One listener per streamed word: remove it when the wait ends normally.
    const t = setTimeout(() => (signal.removeEventListener('abort', onAbort), resolve()), ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });

const RECENT_REQUESTS = 20;

export class ScriptedModel implements ChatModel {
  /** Taken (and ignored) like a real model's, so a session keeps its settings when it moves between providers. */
  readonly settings = SAMPLING_SETTINGS;
  /** How many requests it answered, and the most recent ones (tests assert on them; bounded for a long-running server). */
  requestCount = 0;
  readonly recentRequests: ModelRequest[] = [];

  get lastRequest(): ModelRequest | undefined {
    return this.recentRequests.at(-1);
  }

  async complete(request: ModelRequest, { signal, onDelta }: CompleteOptions): Promise<ModelAnswer> {
    this.requestCount++;
    // Kept as given: the agent hands each request a fresh array of messages it never mutates.
    this.recentRequests.push(request);
    if (this.recentRequests.length > RECENT_REQUESTS) this.recentRequests.shift();
    const { messages } = request;
    let lastUser = messages.length - 1;
    while (lastUser >= 0 && messages[lastUser].role !== 'user') lastUser--;
    if (lastUser < 0) throw new ModelError('scripted model: no user message to answer');
    const script = parseScript((messages[lastUser] as { content: string }).content);
    if (script.fail) throw new ModelError(script.fail);
    const since = messages.slice(lastUser + 1);
    const step = since.filter((m) => m.role === 'assistant').length; // steps already answered this turn
    const { users: turnIndex, words: inputWords } = prefixTotals(messages);

    let answer: ModelAnswer;
    if (step < script.groups.length) {
      const toolCalls: ToolCall[] = script.groups[step].map((c, i) => ({
        id: `call_${turnIndex}_${step + 1}_${i + 1}`,
        name: c.name,
        arguments: c.arguments,
      }));
      answer = { text: '', toolCalls };
    } else {
      answer = { text: finalText(script, since), toolCalls: [] };
    }
    // Usage as a provider would report it, counted in words.
    answer.usage = {
      inputTokens: inputWords,
      outputTokens: words(answer.text) + answer.toolCalls.reduce((n, c) => n + 1 + words(c.arguments), 0),
    };
    for (const word of answer.text.match(/\S+\s*/g) ?? []) {
      if (script.slowMs) await sleep(script.slowMs, signal);
      else if (signal.aborted) throw signal.reason;
      onDelta(word);
    }
    return answer;
  }
}

const words = (t: string | null | undefined) => (t ? (t.match(/\S+/g)?.length ?? 0) : 0);

/** Words and user messages through a message, at the index it had when counted. */
const totalsThrough = new WeakMap<ChatMessage, { index: number; words: number; users: number }>();

/**
 * Words and user messages in `messages`, in time proportional to what is new
 * since an earlier request of the same conversation: messages are shared
 * objects across its requests (model-request.ts), so the running totals kept
 * with the last one already counted at the same index serve as the prefix.
 * Counting every message again made each step of a 200,000-event session's
 * turn cost about 2 ms more than on a short one (the turn bench).
 */
function prefixTotals(messages: ChatMessage[]): { words: number; users: number } {
  let from = messages.length - 1;
  let known: { words: number; users: number } = { words: 0, users: 0 };
  for (; from >= 0; from--) {
    const t = totalsThrough.get(messages[from]);
    if (t?.index === from) {
      known = t;
      break;
    }
  }
  let { words: w, users } = known;
  for (let i = from + 1; i < messages.length; i++) {
    const m = messages[i];
    w += words(m.content);
    if (m.role === 'user') users++;
    totalsThrough.set(m, { index: i, words: w, users });
  }
  return { words: w, users };
}

function finalText(script: Script, since: ChatMessage[]): string {
  const results = since.filter((m): m is Extract<ChatMessage, { role: 'tool' }> => m.role === 'tool');
  if (script.groups.length === 0) return `Echo: ${script.text}`;
  const lines = results.map((r) => `- ${r.tool_call_id}: ${r.content.length > 300 ? `${r.content.slice(0, 300)}…` : r.content}`);
  return [`Done${script.text ? ` (${script.text})` : ''}. Tool results:`, ...lines].join('\n');
}
