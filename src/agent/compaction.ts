// Compaction (docs/contract.md#agent-loop): the model-visible history through a seq
// is replaced by the session's model's summary of it. In the log:
// `plugin/compaction/start`, then `surface/replace {fromSeq, toSeq, content}`,
// then `plugin/compaction/end {fromSeq, toSeq, summarySeq}`. The bracket is
// the agent's (a plugin's): the core never closes it, and a fork inside it
// (after the start, before the end) leaves the child an unfinished compaction
// whose replacement its requests ignore (CompactionBracket).
import { z } from 'zod';
import type { ChatMessage } from '../core/chat.ts';
import { ForklineError } from '../core/errors.ts';
import { toStorableText } from '../core/storable.ts';
import type { LogEvent, NewEvent } from '../core/events.ts';
import { summaryMessage } from '../core/model-request.ts';
import { ContextOverflowError, type ChatModel } from './models/model.ts';
import { CHARS_PER_TOKEN, estimateMessagesTokens } from './context-budget.ts';

export const COMPACTION_START = 'plugin/compaction/start';
export const COMPACTION_END = 'plugin/compaction/end';

/** The first line of a summary request's user message (the scripted model answers it with a digest). */
export const COMPACTION_HEADER = '[forkline compaction] Summarise the conversation below.';

/** What a finished compaction's end records. */
export interface CompactionEndData {
  fromSeq: number;
  toSeq: number;
  summarySeq: number;
  reason: 'manual' | 'automatic';
  /** Model calls the summary took (a history longer than the window is summarised in parts). */
  requests: number;
  /** The history it replaces and the summary that replaces it, in tokens as the context budget estimates them (context-budget.ts). */
  tokensBefore: number;
  tokensAfter: number;
}

/** The range and summary a completed compaction's end names (a failed one's end has no summarySeq). */
const completedEnd = z.object({ fromSeq: z.number().int(), toSeq: z.number().int(), summarySeq: z.number().int() });
export type CompletedCompaction = z.infer<typeof completedEnd>;

/** A plugin/compaction/end's data when it ended a completed compaction, else undefined (plugin data: checked, not assumed). */
export const completedCompaction = (data: unknown): CompletedCompaction | undefined => completedEnd.safeParse(data).data;

/**
 * The compaction bracket as the agent's fold sees it: a `surface/replace`
 * written inside an open compaction takes effect on the model's history only
 * once its `plugin/compaction/end` follows. A fork's marker (`session/end-seed`)
 * ends the parent's unfinished compaction for the child: its start is stale,
 * its replacement never applies. A replacement outside any bracket (an
 * imported log) applies at once.
 */
export class CompactionBracket {
  private open = false;
  private pending?: LogEvent;
  /** The last completed compaction's end (its data), in this log. */
  lastCompleted?: CompletedCompaction & { seq: number };

  /** The bracket as plain JSON (the agent's fold checkpoint). */
  snapshot(): { open: boolean; pending?: LogEvent; lastCompleted?: CompletedCompaction & { seq: number } } {
    return { open: this.open, pending: this.pending, lastCompleted: this.lastCompleted };
  }

  static restore(snap: ReturnType<CompactionBracket['snapshot']>): CompactionBracket {
    const b = new CompactionBracket();
    b.open = snap.open;
    b.pending = snap.pending;
    b.lastCompleted = snap.lastCompleted;
    return b;
  }

  /** The events the conversation applies for `e`: itself, nothing (deferred), or a deferred replacement. */
  filter(e: LogEvent): LogEvent[] {
    switch (e.type) {
      case COMPACTION_START:
        this.open = true;
        this.pending = undefined;
        return [];
      case 'surface/replace':
        if (!this.open) return [e];
        this.pending = e;
        return [];
      case COMPACTION_END: {
        const pending = this.pending;
        this.open = false;
        this.pending = undefined;
        const d = completedCompaction(e.data);
        if (pending && d && d.summarySeq === pending.seq) {
          this.lastCompleted = { ...d, seq: e.seq };
          return [pending];
        }
        return [];
      }
      case 'session/end-seed':
        this.open = false; // the parent's unfinished compaction stays unfinished: inherited, stale
        this.pending = undefined;
        return [e];
      default:
        return [e];
    }
  }
}

/** One message of history as a line of the transcript a summary request holds. */
function transcriptLine(m: ChatMessage, maxChars: number): string {
  let line: string;
  switch (m.role) {
    case 'system':
      line = `[summary] ${m.content}`;
      break;
    case 'user':
      line = `[user] ${m.content}`;
      break;
    case 'assistant': {
      const calls = (m.tool_calls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`);
      line = `[assistant] ${m.content ?? ''}${calls.length ? ` [calls] ${calls.join(' ')}` : ''}`;
      break;
    }
    case 'tool':
      line = `[tool] ${m.content}`;
      break;
  }
  // A run of whitespace holding a line break becomes one space. Matched as whole runs: /\s*\n\s*/ tried every
  // start inside a run without a break and scanned the rest of it each time, so a message of 200,000 spaces held
  // the event loop for minutes (docs/operations.md "Memory and time").
  line = line.replace(/\s+/g, (run) => (run.includes('\n') ? ' ' : run));
  return line.length > maxChars ? `${line.slice(0, maxChars)}…` : line;
}

export interface SummarizeOptions {
  model: ChatModel;
  config: { provider: string; model: string; settings?: Record<string, unknown> };
  /** The tokens one summary request may hold (history part, prompt and the summary so far). */
  requestTokens: number;
  instructions?: string;
  signal: AbortSignal;
}

/** A summary request's own text beyond the transcript: header, instructions, the summary so far (bounded below). */
const PROMPT_RESERVE_CHARS = 4_000;
/** A summary so far, as the next part's request carries it. */
const MAX_CARRIED_SUMMARY_CHARS = 8_000;

/**
 * Asks the model for a summary of `messages`. A history longer than one
 * request holds is summarised in parts, each request carrying the summary so
 * far: every request fits `requestTokens`.
 */
export async function summarize(messages: readonly ChatMessage[], opts: SummarizeOptions): Promise<{ text: string; requests: number }> {
  // The provider counts tokens its own way: a part it refuses as too long is summarised again in smaller parts.
  for (let requestTokens = opts.requestTokens, halvings = 0; ; requestTokens = Math.floor(requestTokens / 2), halvings++) {
    try {
      return await summarizeWithin(messages, { ...opts, requestTokens });
    } catch (err) {
      if (!(err instanceof ContextOverflowError) || halvings >= MAX_SUMMARY_HALVINGS || requestTokens < 2048) throw err;
    }
  }
}

/** How many times a summary is tried again in parts half as large before the provider's refusal stands. */
const MAX_SUMMARY_HALVINGS = 3;

async function summarizeWithin(messages: readonly ChatMessage[], opts: SummarizeOptions): Promise<{ text: string; requests: number }> {
  // A small window gets proportionally less room for the prompt and the summary so far.
  const totalChars = opts.requestTokens * CHARS_PER_TOKEN;
  const carried = Math.floor(Math.min(MAX_CARRIED_SUMMARY_CHARS, totalChars * 0.2));
  const budgetChars = Math.max(500, totalChars - carried - Math.min(PROMPT_RESERVE_CHARS, totalChars * 0.1));
  const parts: string[][] = [[]];
  let used = 0;
  for (const m of messages) {
    const line = transcriptLine(m, budgetChars);
    if (used + line.length + 1 > budgetChars && parts.at(-1)!.length) {
      parts.push([]);
      used = 0;
    }
    parts.at(-1)!.push(line);
    used += line.length + 1;
  }
  let summary = '';
  for (const [i, lines] of parts.entries()) {
    const prompt = [
      COMPACTION_HEADER,
      "Write a concise summary that lets the conversation continue: the user's goals, what was decided and done, tool results that matter, open questions.",
      ...(opts.instructions ? [`Instructions: ${opts.instructions}`] : []),
      ...(parts.length > 1 ? [`This is part ${i + 1} of ${parts.length} of the history.`] : []),
      ...(summary ? [`Summary of the earlier parts:\n${summary.slice(0, carried)}`] : []),
      'Conversation:',
      ...lines,
    ].join('\n');
    const answer = await opts.model.complete(
      { ...opts.config, messages: [{ role: 'user', content: prompt }], tools: [] },
      { signal: opts.signal, onDelta: () => {} },
    );
    summary = answer.text.trim();
  }
  return { text: summary || '(nothing to summarise)', requests: parts.length };
}

/** At most this long, whatever the history's length. */
export const DIGEST_MAX_CHARS = 1_000;

/**
 * The scripted model's summary: a deterministic digest of a summary request's
 * transcript, at most DIGEST_MAX_CHARS characters.
 */
export function digestOf(prompt: string): string {
  const lines = prompt.split('\n');
  const count = (tag: string) => lines.filter((l) => l.startsWith(tag)).length;
  const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);
  const users = lines.filter((l) => l.startsWith('[user] ')).map((l) => l.slice(7));
  const earlier = prompt.match(/Summary of the earlier parts:\n([^\n]*)/)?.[1] ?? lines.find((l) => l.startsWith('[summary] '))?.slice(10);
  const text = [
    `Digest of ${count('[user] ')} user, ${count('[assistant] ')} assistant and ${count('[tool] ')} tool messages.`,
    ...(earlier ? [`Before: ${clip(earlier, 300)}`] : []),
    ...(users.length ? [`First request: ${clip(users[0], 150)}`] : []),
    ...(users.length > 1
      ? [
          `Latest requests: ${users
            .slice(-3)
            .map((u) => clip(u, 100))
            .join(' | ')}`,
        ]
      : []),
  ].join('\n');
  return clip(text, DIGEST_MAX_CHARS - 1);
}

/** Where a compaction's summary was written, and what it saved (CompactionEndData). */
export interface CompactionResult {
  fromSeq: number;
  toSeq: number;
  summarySeq: number;
  tokensBefore: number;
  tokensAfter: number;
}

/**
 * The last seq a manual compaction covers: `throughSeq`, by default the end
 * of the last completed turn (BAD_USER_INPUT when there is none).
 */
export function compactionThrough(sessionId: string, log: { lastTurnEndSeq: number; nextSeq: number }, throughSeq?: number | null): number {
  const through = throughSeq ?? log.lastTurnEndSeq;
  if (through < 0) throw new ForklineError('BAD_USER_INPUT', `session ${sessionId} has no completed turn to compact`);
  if (!Number.isInteger(through) || through >= log.nextSeq) {
    throw new ForklineError('SEQ_OUT_OF_RANGE', `throughSeq ${through} is not an event of session ${sessionId} (0..${log.nextSeq - 1})`);
  }
  return through;
}

export interface WriteCompactionOptions {
  /** Appends under the writer's lease; resolves with the stored events. */
  append(events: NewEvent[]): Promise<Array<{ seq: number }>>;
  /** The model-visible history through `through`. */
  history: readonly ChatMessage[];
  through: number;
  reason: CompactionEndData['reason'];
  instructions?: string;
  summarize: Omit<SummarizeOptions, 'instructions'>;
  /** Whether an end recording the model's failure may still be written (the writer still holds the session). */
  mayRecordFailure?: () => boolean;
  /** The error a failed summary is thrown as. */
  failure?: (err: unknown) => Error;
}

/**
 * Writes a compaction: its start, the model's summary of the history through
 * `through` as a surface/replace from seq 0 (it covers every earlier
 * replacement, whose summaries the history it summarises holds), its end.
 * A model that fails leaves an end with the error, and throws.
 */
export async function writeCompaction(opts: WriteCompactionOptions): Promise<CompactionResult> {
  const { through, reason, instructions } = opts;
  const fromSeq = 0;
  await opts.append([{ type: COMPACTION_START, data: { reason, fromSeq, toSeq: through, ...(instructions ? { instructions } : {}) } }]);
  let summary: { text: string; requests: number };
  try {
    summary = await summarize(opts.history, { ...opts.summarize, instructions });
  } catch (err) {
    const message = (err as Error).message ?? String(err);
    if (opts.mayRecordFailure?.() ?? true) {
      await opts.append([{ type: COMPACTION_END, data: { reason, fromSeq, toSeq: through, error: message.slice(0, 2000) } }]).catch(() => {});
    }
    throw opts.failure ? opts.failure(err) : err;
  }
  const content = toStorableText(summary.text);
  const [replace] = await opts.append([{ type: 'surface/replace', data: { fromSeq, toSeq: through, content } }]);
  const tokensBefore = estimateMessagesTokens(opts.history);
  const tokensAfter = estimateMessagesTokens([{ role: 'system', content: summaryMessage(fromSeq, through, content) }]);
  const end: CompactionEndData = { fromSeq, toSeq: through, summarySeq: replace.seq, reason, requests: summary.requests, tokensBefore, tokensAfter };
  await opts.append([{ type: COMPACTION_END, data: { ...end } }]);
  return { fromSeq, toSeq: through, summarySeq: replace.seq, tokensBefore, tokensAfter };
}
