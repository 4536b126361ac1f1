// The keyless, deterministic default model, as an AI SDK language model
// (LanguageModelV3): the agent calls it exactly as it calls a provider's. It
// answers from the prompt alone, so a fork and its parent given the same
// history answer the same way.
//
// Cues, one per line in the user's message (documented in docs/agents.md):
//   !call <tool> <json arguments>   call a tool in the current step
//   !then                           start the next step's group of calls
//   !fail <message>                 the model errors (the turn ends failed)
//   !slow <ms>                      wait this long between streamed words
// Without cues it answers `Echo: <text>`. After the last group of calls it
// answers with a summary of the tool results it was given.
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3GenerateResult,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3StreamResult,
  LanguageModelV3ToolResultPart,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { setImmediate } from 'node:timers/promises';
import { ModelError } from './model.ts';
import { COMPACTION_HEADER, digestOf } from '../compaction.ts';

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

interface Answer {
  text: string;
  toolCalls: Array<{ id: string; name: string; arguments: string }>;
  usage: LanguageModelV3Usage;
  slowMs: number;
}

const NEVER = new AbortController().signal;

export class ScriptedLanguageModel implements LanguageModelV3 {
  readonly specificationVersion = 'v3';
  readonly provider = 'scripted';
  readonly supportedUrls = {};

  constructor(readonly modelId = 'scripted') {}

  async doGenerate(options: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> {
    const a = answer(options.prompt);
    const content: LanguageModelV3Content[] = [
      ...(a.text ? [{ type: 'text' as const, text: a.text }] : []),
      ...a.toolCalls.map((c) => ({ type: 'tool-call' as const, toolCallId: c.id, toolName: c.name, input: c.arguments })),
    ];
    return { content, finishReason: finishReason(a), usage: a.usage, warnings: [] };
  }

  async doStream(options: LanguageModelV3CallOptions): Promise<LanguageModelV3StreamResult> {
    const a = answer(options.prompt);
    const signal = options.abortSignal ?? NEVER;
    const parts = partsOf(a);
    let next = 0;
    // Enqueued a batch at a time as the reader asks, never the whole answer at once: a queue of one part a word made
    // its reads cost the square of the words (the stream's queue dequeues by shifting an array), and a message of
    // 100,000 words held the event loop for seconds. Between batches the loop serves other requests (docs/operations.md,
    // "Event-loop time").
    const stream = new ReadableStream<LanguageModelV3StreamPart>({
      async pull(out) {
        try {
          if (next > 0) await setImmediate();
          for (const end = Math.min(parts.count, next + PARTS_PER_PULL); next < end; next++) {
            const part = parts.at(next);
            if (part.type === 'text-delta') {
              if (a.slowMs) await sleep(a.slowMs, signal);
              else if (signal.aborted) throw signal.reason;
            }
            out.enqueue(part);
          }
          if (next === parts.count) out.close();
        } catch (err) {
          out.error(err);
        }
      },
    });
    return { stream };
  }
}

/** The most parts the answer's stream is given at once, and so the most its reader handles before the loop serves other work. */
const PARTS_PER_PULL = 256;

/** The answer's stream parts, one text delta a word, each made when it is enqueued (an index, not a generator: the cheaper per part). */
function partsOf(a: Answer): { count: number; at(i: number): LanguageModelV3StreamPart } {
  const words = a.text ? (a.text.match(/\S+\s*/g) ?? []) : [];
  const head: LanguageModelV3StreamPart[] = [{ type: 'stream-start', warnings: [] }, ...(a.text ? [{ type: 'text-start' as const, id: 'text' }] : [])];
  const tail: LanguageModelV3StreamPart[] = [
    ...(a.text ? [{ type: 'text-end' as const, id: 'text' }] : []),
    ...a.toolCalls.map((c) => ({ type: 'tool-call' as const, toolCallId: c.id, toolName: c.name, input: c.arguments })),
    { type: 'finish', finishReason: finishReason(a), usage: a.usage },
  ];
  return {
    count: head.length + words.length + tail.length,
    at: (i) =>
      i < head.length
        ? head[i]
        : i < head.length + words.length
          ? { type: 'text-delta', id: 'text', delta: words[i - head.length] }
          : tail[i - head.length - words.length],
  };
}

const finishReason = (a: Answer) => (a.toolCalls.length ? { unified: 'tool-calls' as const, raw: undefined } : { unified: 'stop' as const, raw: undefined });

function answer(prompt: LanguageModelV3Prompt): Answer {
  let lastUser = prompt.length - 1;
  while (lastUser >= 0 && prompt[lastUser].role !== 'user') lastUser--;
  if (lastUser < 0) throw new ModelError('scripted model: no user message to answer');
  const userText = textOf(prompt[lastUser]);
  // A compaction's summary request: a deterministic, bounded digest (compaction.ts).
  if (userText.startsWith(COMPACTION_HEADER)) {
    const text = digestOf(userText);
    const input = words(userText);
    return {
      text,
      toolCalls: [],
      slowMs: 0,
      usage: {
        inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: words(text), text: words(text), reasoning: undefined },
      },
    };
  }
  const script = parseScript(userText);
  if (script.fail) throw new ModelError(script.fail);
  const since = prompt.slice(lastUser + 1);
  const step = since.filter((m) => m.role === 'assistant').length; // steps already answered this turn
  const { users: turnIndex, words: inputWords } = prefixTotals(prompt);

  let text = '';
  let toolCalls: Answer['toolCalls'] = [];
  if (step < script.groups.length) {
    toolCalls = script.groups[step].map((c, i) => ({ id: `call_${turnIndex}_${step + 1}_${i + 1}`, name: c.name, arguments: c.arguments }));
  } else {
    text = finalText(script, since);
  }
  // Usage as a provider would report it, counted in words.
  const output = words(text) + toolCalls.reduce((n, c) => n + 1 + words(c.arguments), 0);
  return {
    text,
    toolCalls,
    slowMs: script.slowMs,
    usage: {
      inputTokens: { total: inputWords, noCache: inputWords, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: output, text: output, reasoning: undefined },
    },
  };
}

/** Runs of non-white-space (as /\S+/g counts them), without making an array of them: a long history's text is counted once at a cold start. */
export function words(t: string | null | undefined): number {
  if (!t) return 0;
  let n = 0;
  let inWord = false;
  for (let i = 0; i < t.length; i++) {
    const space = isSpace(t.charCodeAt(i));
    if (!space && !inWord) n++;
    inWord = !space;
  }
  return n;
}

/** JavaScript's \s: ASCII and Unicode white space, line terminators and the byte-order mark. */
function isSpace(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13);
  if (c < 160) return false;
  return (
    c === 160 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  );
}

/** The text a message holds: its text parts, or its tool results' text. */
function textOf(m: LanguageModelV3Message): string {
  if (m.role === 'system') return m.content;
  let text = '';
  for (const p of m.content) {
    if (p.type === 'text') text += p.text;
    else if (p.type === 'tool-result') text += resultText(p);
  }
  return text;
}

function resultText(p: LanguageModelV3ToolResultPart): string {
  const o = p.output;
  return o.type === 'text' || o.type === 'error-text' ? o.value : JSON.stringify(o);
}

/** Words and user messages through a message, at the index it had when counted. */
const totalsThrough = new WeakMap<LanguageModelV3Message, { index: number; words: number; users: number }>();

/**
 * Words and user messages in `prompt`, in time proportional to what is new
 * since an earlier request of the same conversation: its messages are shared
 * objects across its requests (model-request.ts, prompt.ts), so the running
 * totals kept with the last one already counted at the same index serve as the
 * prefix. Counting every message again made each step of a long session's
 * turn cost more than a short one's (the turns bench shows how much).
 */
function prefixTotals(prompt: LanguageModelV3Prompt): { words: number; users: number } {
  let from = prompt.length - 1;
  let known: { words: number; users: number } = { words: 0, users: 0 };
  for (; from >= 0; from--) {
    const t = totalsThrough.get(prompt[from]);
    if (t?.index === from) {
      known = t;
      break;
    }
  }
  let { words: w, users } = known;
  for (let i = from + 1; i < prompt.length; i++) {
    const m = prompt[i];
    w += words(textOf(m));
    if (m.role === 'user') users++;
  }
  // Kept with the last message only: the next request of the conversation starts with it.
  if (prompt.length > from + 1) totalsThrough.set(prompt[prompt.length - 1], { index: prompt.length - 1, words: w, users });
  return { words: w, users };
}

function finalText(script: Script, since: LanguageModelV3Prompt): string {
  if (script.groups.length === 0) return `Echo: ${script.text}`;
  const results = since.flatMap((m) => (m.role === 'tool' ? m.content.filter((p) => p.type === 'tool-result') : []));
  const lines = results.map((r) => {
    const content = resultText(r);
    return `- ${r.toolCallId}: ${content.length > 300 ? `${content.slice(0, 300)}…` : content}`;
  });
  return [`Done${script.text ? ` (${script.text})` : ''}. Tool results:`, ...lines].join('\n');
}
