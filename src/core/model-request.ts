// History → model request (docs/contract.md#continuing-a-child): the model-visible conversation of a
// log, in OpenAI chat format. Pure.
//
// The conversation is built incrementally: the agent keeps one per session and
// applies only the events appended since (a turn on a long session costs the
// new events, not a replay). buildModelMessages is the same fold over a whole log.
import { TOOL_ERROR_PREFIX, type ChatMessage } from './chat.ts';
import type { EventData, LogEvent, ResponseFormat } from './events.ts';
import { asCoreEvent, otherThanCore } from './core-event.ts';
import { heldText, leftOutHistoryMessage, MAX_HELD_EVENT_CHARS, MAX_HELD_HISTORY_CHARS } from './held-text.ts';
import { wireId, wireIdWith } from './wire-names.ts';

/** The system message a compaction's summary stands as in the model's history. */
export const summaryMessage = (fromSeq: number, toSeq: number, content: string) => `Summary of earlier conversation (events ${fromSeq}..${toSeq}):\n${content}`;

type AssistantMessage = Extract<ChatMessage, { role: 'assistant' }>;

/**
 * One call as the conversation tracks it: its turn, step and id. Call ids are
 * unique only within a step (docs/contract.md#append-rules: `call ids`) and a
 * result answers a call of its own step (`result pairing`), so an id reused in
 * a later step is another call, answered only by a result of that step (turn
 * and step are integers: the key reads back one way).
 */
export const callKey = (turn: number, step: number, callId: string) => `${turn}:${step}:${callId}`;

/**
 * The ids a render sends calls under. A call goes by its wire id (wire-names.ts:
 * its own when every provider takes it). A request must not hold two calls with
 * one id (Anthropic refuses it, OpenAI Responses pairs outputs by call_id), but
 * the log may reuse an id in a later step (docs/contract.md#append-rules), and two
 * ids may share a wire form: a call keeps its wire id unless a call shown before
 * it, or an earlier call of its own step, was sent under it; then it goes by
 * `<wire id>_t<turn>s<step>` (`_<n>` added while that is taken too; the id cut so
 * that the whole is still a wire id). The choice depends only on what is rendered
 * before the call, so a request built again, or continued, sends the same ids.
 * Its result follows it (the tool message's tool_call_id). AG-UI gives clients
 * the same ids (agui/agui-events.ts), every call shown as it is made.
 */
export class SentCallIds {
  /** Ids of the calls shown (answered) in the render so far. */
  private readonly shown = new Set<string>();
  /** The step of the last message with calls, and the ids its calls were given. */
  private step = '';
  private readonly stepIds = new Set<string>();
  /** The calls sent under an id other than their own, by callKey. */
  private readonly renamed = new Map<string, string>();

  /** The ids of a render's messages so far (a restored conversation's, whose calls are all answered). */
  static of(messages: readonly ChatMessage[]): SentCallIds {
    const ids = new SentCallIds();
    for (const m of messages) if (m.role === 'assistant') for (const c of m.tool_calls ?? []) ids.shown.add(c.id);
    return ids;
  }

  /** Gives a message's calls their ids, those `answered` shown at once. */
  assign(d: EventData<'model/message'>, answered: (key: string) => boolean): void {
    const step = `${d.turn}:${d.step}`;
    if (step !== this.step) {
      this.step = step;
      this.stepIds.clear();
    }
    for (const c of d.toolCalls) {
      const key = callKey(d.turn, d.step, c.id);
      const taken = (id: string) => this.shown.has(id) || this.stepIds.has(id);
      const own = wireId(c.id);
      let id = own;
      if (taken(id)) {
        const at = `_t${d.turn}s${d.step}`;
        id = wireIdWith(own, at);
        for (let n = 2; taken(id); n++) id = wireIdWith(own, `${at}_${n}`);
      }
      if (id !== c.id) this.renamed.set(key, id);
      this.stepIds.add(id);
      if (answered(key)) this.shown.add(id);
    }
  }

  /** A call's id in requests (by callKey, and its own id). */
  sent(key: string, callId: string): string {
    return this.renamed.get(key) ?? callId;
  }

  /** Its call is answered: shown from now on. */
  answer(key: string, callId: string): void {
    this.shown.add(this.sent(key, callId));
  }
}

// What a conversation holds in the heap, estimated from its shape (the agent's fold
// cache is bounded by it): text alone undercounts it about three times, since
// each event keeps its data object, its rendered message and index entries.
/** An object with a handful of fields (64-bit V8: a header and 8 bytes a field). */
const OBJECT_BYTES = 64;
/** A slot in an array, Map or Set, with the slack they grow with. */
const SLOT_BYTES = 24;
/** A string: its header and its characters (two bytes each once any is outside Latin-1). */
const stringBytes = (s: string | undefined | null): number => (s ? 16 + s.length * (/[\u0100-\uffff]/.test(s) ? 2 : 1) : 0);

/** A message-producing event, kept so that a surface/replace can re-render history. */
type Entry =
  | { seq: number; kind: 'user'; inputId: string }
  | { seq: number; kind: 'assistant'; data: EventData<'model/message'> }
  | { seq: number; kind: 'tool'; data: EventData<'tool/result'> };

/**
 * A Conversation as plain JSON (Conversation.snapshot), in three parts that a
 * checkpoint stores apart (agent/session-fold.ts): what new events and the next
 * request read, the rendered messages, and the folded history, which only
 * rendering history again needs (a surface/replace, a compaction's range), so a
 * restore may leave it unparsed until then.
 */
export interface ConversationSnapshot {
  head: {
    /** Input texts no turn has taken yet (taken ones are in the history). */
    inputs: Array<[string, string]>;
    responseFormats: Array<[string, ResponseFormat]>;
    replacements: Array<[number, { toSeq: number; content: string; seq: number }]>;
    instructions?: string;
    approxChars: number;
    /** Estimated heap bytes of the rendered messages, recorded so that a restore need not walk them (absent from older checkpoints). */
    messagesBytes?: number;
    /** Characters of history held (held-text.ts), the earliest history left out, and its calls still unanswered (by callKey). */
    heldChars: number;
    leftOut?: LeftOut;
    leftOutCalls: string[];
  };
  /** The rendered messages, without the instructions. */
  messages: ChatMessage[];
  history: ConversationHistory;
}

/** The earliest history a conversation no longer holds (MAX_HELD_HISTORY_CHARS): through which seq, how many messages and characters. */
interface LeftOut {
  throughSeq: number;
  messages: number;
  chars: number;
}

/** What a conversation folded: its message-producing events, the texts of the inputs its turns took, the calls answered (by callKey). */
export interface ConversationHistory {
  entries: Entry[];
  inputs: Array<[string, string]>;
  answered: string[];
}

/**
 * The conversation of a log:
 * - a user message when a turn starts, with the text of the input it took;
 * - an assistant message per model/message, with its tool calls;
 * - a tool message per tool/result (real or synthetic, with its wording);
 * - a surface/replace hides the events of its range and stands in their place.
 * A call that never got a result (a historical failure in a closed step) is left
 * out of its assistant message: chat APIs reject calls without answers. A
 * result answers only the call of its own step (callKey): an id reused by a
 * later step is not answered by an earlier step's result.
 */
export class Conversation {
  private entries: Entry[] = [];
  private readonly inputs = new Map<string, string>();
  /** The response schemas inputs asked for (structured output), by input id. */
  private readonly responseFormats = new Map<string, ResponseFormat>();
  /** The calls answered, by callKey. */
  private readonly answered = new Set<string>();
  private readonly replacements = new Map<number, { toSeq: number; content: string; seq: number }>();
  /** The history a restore left unread (it comes before everything above): read once, when history is rendered again. */
  private unread?: () => ConversationHistory;
  /** The rendered messages; undefined after a surface/replace until the next render. */
  private rendered?: ChatMessage[] = [];
  /** Index in `rendered` of the assistant message that made each call, by callKey. */
  private readonly callMessage = new Map<string, { index: number; entry: Entry & { kind: 'assistant' } }>();
  /** The ids `rendered` sends calls under; unset after a restore until a call needs one (read from the messages then). */
  private sentIds?: SentCallIds = new SentCallIds();
  /** Rough size of the text held (kept in checkpoints). */
  approxChars = 0;
  /** Characters of the history's entries (their texts, a user message's input): held within MAX_HELD_HISTORY_CHARS. */
  private heldChars = 0;
  /** The earliest history left out to stay within it. */
  private leftOut?: LeftOut;
  /** Calls of left-out messages not answered yet, by callKey: their results are left out too (a result never comes without its call). */
  private readonly leftOutCalls = new Set<string>();
  /** Estimated heap bytes held: the agent's fold cache is bounded by it. */
  approxBytes = 0;
  /**
   * The session's instructions as the first (system) message of every request
   * (docs/contract.md: instructions are sent first): one object while they hold,
   * so a request still continues the one before it (models/prompt.ts).
   */
  private instructionsMessage?: Extract<ChatMessage, { role: 'system' }>;

  /** The instructions in force (session/instructions; empty text: none). */
  get instructions(): string | undefined {
    return this.instructionsMessage?.content;
  }

  /** What it folded and rendered, as plain JSON (the agent's fold checkpoint). */
  snapshot(): ConversationSnapshot {
    this.rendered ??= this.renderAll();
    this.readHistory();
    const taken = new Set<string>();
    for (const e of this.entries) if (e.kind === 'user') taken.add(e.inputId);
    const inputs = [...this.inputs];
    return {
      head: {
        inputs: inputs.filter(([id]) => !taken.has(id)),
        responseFormats: [...this.responseFormats],
        replacements: [...this.replacements],
        instructions: this.instructionsMessage?.content,
        approxChars: this.approxChars,
        messagesBytes: this.rendered.reduce((n, m) => n + messageBytes(m), 0),
        heldChars: this.heldChars,
        leftOut: this.leftOut,
        leftOutCalls: [...this.leftOutCalls],
      },
      messages: this.rendered,
      history: { entries: this.entries, inputs: inputs.filter(([id]) => taken.has(id)), answered: [...this.answered] },
    };
  }

  /**
   * The conversation a snapshot holds: the same messages as the fold that made
   * it, starting from its rendered messages (trusted: the service's own
   * checkpoint). `history` is called only if history must be rendered again.
   * The messages are not walked: their bytes are the ones the checkpoint
   * recorded or, in one that did not, follow from `messagesTextLength`, the
   * length of their JSON text (a long session's restore holds ~300,000 of them).
   */
  static restore(head: ConversationSnapshot['head'], messages: ChatMessage[], history: () => ConversationHistory, messagesTextLength: number): Conversation {
    const c = new Conversation();
    for (const [k, v] of head.inputs) c.inputs.set(k, v);
    for (const [k, v] of head.responseFormats) c.responseFormats.set(k, v);
    for (const [k, v] of head.replacements) c.replacements.set(k, v);
    if (head.instructions) c.instructionsMessage = { role: 'system', content: head.instructions };
    c.rendered = messages;
    c.sentIds = undefined;
    c.unread = history;
    c.heldChars = head.heldChars;
    c.leftOut = head.leftOut;
    for (const id of head.leftOutCalls) c.leftOutCalls.add(id);
    c.approxChars = head.approxChars;
    c.approxBytes += head.messagesBytes ?? messagesTextBytes(messagesTextLength, messages.length);
    for (const [id, text] of head.inputs) c.approxBytes += inputBytes(id, text);
    for (const [, r] of head.replacements) c.approxBytes += replacementBytes(r.content);
    c.approxBytes += stringBytes(head.instructions);
    return c;
  }

  /** Reads the history a restore left unread, before what was folded since (whose inputs and answers are newer). */
  private readHistory(): void {
    if (!this.unread) return;
    const h = this.unread();
    this.unread = undefined;
    this.entries = h.entries.concat(this.entries); // not push(...): a long history exceeds the call stack's argument limit
    // Its rendered messages were counted at the restore: the entries add the rest.
    for (const e of h.entries) this.approxBytes += entryBytes(e) - OBJECT_BYTES - SLOT_BYTES;
    for (const [k, v] of h.inputs)
      if (!this.inputs.has(k)) {
        this.inputs.set(k, v);
        this.approxBytes += inputBytes(k, v);
      }
    for (const id of h.answered) this.answered.add(id);
  }

  /** Sets the instructions in force (a cold fold starts with those of its starting point). */
  setInstructions(text: string): void {
    this.approxBytes += stringBytes(text) - stringBytes(this.instructionsMessage?.content);
    this.instructionsMessage = text ? { role: 'system', content: text } : undefined;
    this.approxChars += text.length;
  }

  apply(e: LogEvent): this {
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'inbox/add': {
        const text = heldText(ev.data.text, e.seq);
        this.inputs.set(ev.data.inputId, text);
        this.approxChars += text.length;
        this.approxBytes += inputBytes(ev.data.inputId, text) + (ev.data.responseFormat ? stringBytes(JSON.stringify(ev.data.responseFormat)) : 0);
        if (ev.data.responseFormat) this.responseFormats.set(ev.data.inputId, ev.data.responseFormat);
        break;
      }
      case 'turn/start':
        this.add({ seq: e.seq, kind: 'user', inputId: ev.data.inputId });
        break;
      case 'model/message': {
        const data = heldMessage(ev.data, e.seq);
        this.approxChars += data.text.length + data.toolCalls.reduce((n, c) => n + c.arguments.length + 64, 0);
        this.add({ seq: e.seq, kind: 'assistant', data });
        break;
      }
      case 'tool/result': {
        const data = ev.data.content.length > MAX_HELD_EVENT_CHARS ? { ...ev.data, content: heldText(ev.data.content, e.seq) } : ev.data;
        const key = callKey(data.turn, data.step, data.callId);
        if (this.leftOutCalls.delete(key)) {
          this.answered.add(key);
          this.noteLeftOut(e.seq, data.content.length);
          break;
        }
        this.approxChars += data.content.length;
        this.answered.add(key);
        this.add({ seq: e.seq, kind: 'tool', data });
        // Its call is now answered: the assistant message that made it shows it.
        const made = this.callMessage.get(key);
        if (made && this.rendered) {
          this.liveIds().answer(key, data.callId);
          this.rendered[made.index] = this.assistantMessage(made.entry.data, this.liveIds());
        } else if (this.unread) this.rendered = undefined; // a call made before a restore (none is left open at a checkpoint): render again
        break;
      }
      case 'surface/replace': {
        const content = heldText(ev.data.content, e.seq);
        this.replacements.set(ev.data.fromSeq, { toSeq: ev.data.toSeq, content, seq: e.seq });
        this.approxChars += content.length;
        this.approxBytes += replacementBytes(content);
        this.rendered = undefined; // a range of history changes: render again, once
        break;
      }
      case 'session/instructions':
        this.setInstructions(ev.data.text);
        break;
      // Not part of what the model reads: bookkeeping, brackets and settings.
      case 'inbox/remove':
      case 'step/start':
      case 'step/end':
      case 'turn/end':
      case 'session/title':
      case 'session/model':
      case 'session/tools':
      case 'session/runner-tools':
      case 'session/tool-approval':
      case 'tool/approval-request':
      case 'tool/approval':
      case 'session/end-seed':
        break;
      default:
        otherThanCore(ev);
    }
    return this;
  }

  /** The response schema an input asked its answer to match, if any. */
  responseFormatOf(inputId: string | undefined): ResponseFormat | undefined {
    return inputId === undefined ? undefined : this.responseFormats.get(inputId);
  }

  applyAll(events: Iterable<LogEvent>): this {
    for (const e of events) this.apply(e);
    return this;
  }

  /** The messages so far: a fresh array (the caller may keep it), shared message objects (never mutated). */
  messages(opts: { system?: string } = {}): ChatMessage[] {
    this.rendered ??= this.renderAll();
    const first: ChatMessage[] = [];
    if (this.instructionsMessage) first.push(this.instructionsMessage);
    if (opts.system) first.push({ role: 'system', content: opts.system });
    return first.length ? [...first, ...this.rendered] : this.rendered.slice();
  }

  /**
   * The messages of the log through `throughSeq` only (what a compaction
   * summarises): entries and replacements written at or before it.
   */
  messagesThrough(throughSeq: number): ChatMessage[] {
    return this.renderAll(throughSeq);
  }

  private add(entry: Entry) {
    if (entry.kind === 'user' && !this.inputs.has(entry.inputId)) this.readHistory(); // its text is counted below
    this.entries.push(entry);
    this.approxBytes += entryBytes(entry);
    this.heldChars += this.entryChars(entry);
    // New events come after every replaced range (a surface/replace covers earlier events only).
    if (this.rendered) this.push(this.rendered, entry);
    if (this.heldChars > MAX_HELD_HISTORY_CHARS) this.leaveOutEarliest();
  }

  /** Characters an entry holds: its texts, or a user message's input. */
  private entryChars(entry: Entry): number {
    switch (entry.kind) {
      case 'user':
        return this.inputs.get(entry.inputId)?.length ?? 0;
      case 'assistant':
        return entry.data.text.length + entry.data.toolCalls.reduce((n, c) => n + c.arguments.length, 0);
      case 'tool':
        return entry.data.content.length;
    }
  }

  private noteLeftOut(seq: number, chars: number) {
    const l = (this.leftOut ??= { throughSeq: seq, messages: 0, chars: 0 });
    l.throughSeq = Math.max(l.throughSeq, seq);
    l.messages++;
    l.chars += chars;
  }

  /**
   * Leaves out the earliest entries until the history holds three quarters of
   * MAX_HELD_HISTORY_CHARS (so that it happens once per quarter of new text),
   * with the results of the calls left out; a system message stands for them.
   */
  private leaveOutEarliest() {
    this.readHistory();
    const target = (MAX_HELD_HISTORY_CHARS * 3) / 4;
    let n = 0;
    while (n < this.entries.length - 1 && (this.heldChars > target || this.entries[n].kind === 'tool')) {
      const entry = this.entries[n++];
      const chars = this.entryChars(entry);
      this.heldChars -= chars;
      this.approxBytes -= entryBytes(entry);
      if (entry.kind === 'user') {
        const text = this.inputs.get(entry.inputId);
        if (text !== undefined) this.approxBytes -= inputBytes(entry.inputId, text);
        this.inputs.delete(entry.inputId);
        this.responseFormats.delete(entry.inputId);
      } else if (entry.kind === 'assistant') {
        for (const c of entry.data.toolCalls) {
          const key = callKey(entry.data.turn, entry.data.step, c.id);
          this.callMessage.delete(key);
          if (!this.answered.has(key)) this.leftOutCalls.add(key);
        }
      }
      this.noteLeftOut(entry.seq, chars);
    }
    this.entries = this.entries.slice(n);
    this.rendered = undefined; // render again, once
  }

  /** The ids of the live render's calls. */
  private liveIds(): SentCallIds {
    return (this.sentIds ??= SentCallIds.of(this.rendered ?? []));
  }

  private push(out: ChatMessage[], entry: Entry, ids = this.liveIds()) {
    switch (entry.kind) {
      case 'user':
        if (!this.inputs.has(entry.inputId)) this.readHistory(); // an input taken before a restore (a checkpoint keeps the waiting ones at hand)
        out.push({ role: 'user', content: this.inputs.get(entry.inputId) ?? '' });
        break;
      case 'assistant':
        ids.assign(entry.data, (key) => this.answered.has(key));
        if (ids === this.sentIds)
          for (const c of entry.data.toolCalls) this.callMessage.set(callKey(entry.data.turn, entry.data.step, c.id), { index: out.length, entry });
        out.push(this.assistantMessage(entry.data, ids));
        break;
      case 'tool': {
        const d = entry.data;
        out.push({
          role: 'tool',
          tool_call_id: ids.sent(callKey(d.turn, d.step, d.callId), d.callId),
          content: d.status === 'error' ? `${TOOL_ERROR_PREFIX}${d.content}` : d.content,
        });
        break;
      }
    }
  }

  private assistantMessage(d: EventData<'model/message'>, ids: SentCallIds): AssistantMessage {
    const calls = d.toolCalls.filter((c) => this.answered.has(callKey(d.turn, d.step, c.id)));
    return {
      role: 'assistant',
      content: d.text === '' && calls.length ? null : d.text,
      ...(calls.length
        ? {
            tool_calls: calls.map((c) => ({
              id: ids.sent(callKey(d.turn, d.step, c.id), c.id),
              type: 'function' as const,
              function: { name: c.name, arguments: c.arguments },
            })),
          }
        : {}),
    };
  }

  /**
   * Renders history with its replacements: a replacement stands at its fromSeq
   * (unless an earlier one already hides that seq) and hides its range.
   */
  private renderAll(throughSeq = Infinity): ChatMessage[] {
    this.readHistory();
    const partial = throughSeq !== Infinity;
    // A partial render (a compaction's range) is not the live one: it records no call's place and gives ids of its own.
    const ids = new SentCallIds();
    if (!partial) {
      this.callMessage.clear();
      this.sentIds = ids;
    }
    const out: ChatMessage[] = [];
    const replacements = [...this.replacements].filter(([, r]) => r.seq <= throughSeq).sort(([a], [b]) => a - b);
    let next = 0;
    let hiddenThrough = -1;
    const replaceThrough = (seq: number) => {
      for (; next < replacements.length && replacements[next][0] <= seq; next++) {
        const [fromSeq, r] = replacements[next];
        if (fromSeq <= hiddenThrough) continue;
        out.push({ role: 'system', content: summaryMessage(fromSeq, r.toSeq, r.content) });
        hiddenThrough = r.toSeq;
      }
    };
    // The history left out comes first: a summary of it stands instead when there is one, else a note of it.
    const l = this.leftOut;
    if (l && l.throughSeq <= throughSeq) {
      replaceThrough(l.throughSeq);
      if (l.throughSeq > hiddenThrough) out.push({ role: 'system', content: leftOutHistoryMessage(l.throughSeq, l.messages, l.chars) });
    }
    for (const entry of this.entries) {
      if (entry.seq > throughSeq) break;
      replaceThrough(entry.seq);
      if (entry.seq > hiddenThrough) {
        this.push(out, entry, ids);
      }
    }
    replaceThrough(throughSeq);
    return out;
  }
}

/** A model message as the history holds it (held-text.ts): its text and its calls' arguments each within MAX_HELD_EVENT_CHARS. */
function heldMessage(d: EventData<'model/message'>, seq: number): EventData<'model/message'> {
  if (d.text.length <= MAX_HELD_EVENT_CHARS && d.toolCalls.every((c) => c.arguments.length <= MAX_HELD_EVENT_CHARS)) return d;
  return { ...d, text: heldText(d.text, seq), toolCalls: d.toolCalls.map((c) => ({ ...c, arguments: heldText(c.arguments, seq) })) };
}

/** A rendered message (what a checkpoint records for a restored conversation, before its history is read). */
function messageBytes(m: ChatMessage): number {
  let n = OBJECT_BYTES + SLOT_BYTES + stringBytes(m.content);
  if (m.role === 'tool') n += stringBytes(m.tool_call_id);
  if (m.role === 'assistant')
    for (const c of m.tool_calls ?? [])
      n += 3 * OBJECT_BYTES + SLOT_BYTES + stringBytes(c.id) + stringBytes(c.function.name) + stringBytes(c.function.arguments);
  return n;
}

/** Messages known by the length of their JSON text: its characters, and per message its object, slot and string header. */
const messagesTextBytes = (textLength: number, count: number) => textLength + count * (OBJECT_BYTES + SLOT_BYTES + 16);

/** An input's text and id, in the inputs map. */
const inputBytes = (inputId: string, text: string) => SLOT_BYTES + stringBytes(inputId) + stringBytes(text);

/** A replacement, and the summary message rendered from it. */
const replacementBytes = (content: string) => 2 * OBJECT_BYTES + SLOT_BYTES + 2 * stringBytes(content);

/** An entry with what it keeps: its data, its rendered message, and per call the rendered call and its index entries. */
function entryBytes(entry: Entry): number {
  const base = 2 * OBJECT_BYTES + 2 * SLOT_BYTES; // the entry and its message, in `entries` and `rendered`
  switch (entry.kind) {
    case 'user':
      return base + stringBytes(entry.inputId);
    case 'assistant': {
      const d = entry.data;
      let n = base + OBJECT_BYTES + stringBytes(d.text) + (d.usage ? OBJECT_BYTES : 0) + (d.output !== undefined ? stringBytes(JSON.stringify(d.output)) : 0);
      for (const c of d.toolCalls) n += 4 * OBJECT_BYTES + 3 * SLOT_BYTES + stringBytes(c.id) + stringBytes(c.name) + stringBytes(c.arguments);
      return n;
    }
    case 'tool': {
      const d = entry.data;
      // An error's content is rendered with a prefix: a second string.
      const rendered = d.status === 'error' ? stringBytes(d.content) : 0;
      return base + OBJECT_BYTES + SLOT_BYTES + stringBytes(d.callId) + stringBytes(d.resultId) + stringBytes(d.content) + stringBytes(d.name) + rendered;
    }
  }
}

/** The conversation of a whole log (the agent keeps a Conversation instead). */
export function buildModelMessages(events: Iterable<LogEvent>, opts: { system?: string } = {}): ChatMessage[] {
  return new Conversation().applyAll(events).messages(opts);
}
