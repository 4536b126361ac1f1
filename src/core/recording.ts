// Recordings (docs/contract.md#formats): a session as JSON Lines — a header line, then one line
// per event in seq order, then one line per file content its change sets name
// (`{"blob": <sha-256>, "base64": …}`; none for a session without files). Pure: line splitting, the streaming validator and the
// serializers; store/recordings.ts reads and writes sessions with them.
import { z } from 'zod';
import { ForklineError } from './errors.ts';
import { jsonTextRefusal, unstorableReason } from './storable.ts';
import { decodeUtf8, idSchema, INVALID_UTF8, runnerPoolSchema, titleSchema } from './input-rules.ts';
import { LogState } from './log-state.ts';
import { withDeclaredEffects } from './runner-tools.ts';
import { dataOf } from './core-event.ts';
import { FILES_CHANGE, type FilesChangeData } from './file-tree.ts';
import { CURRENT_FORMAT_VERSION, FORMAT_VERSIONS, decodeEvent, type FormatVersion, type LogEvent } from './events.ts';

export const RECORDING_FORMAT = 'forkline.recording';
export const MAX_RECORDING_BYTES = 64 * 1024 * 1024;
/**
 * A recording sent as a GraphQL string argument lives in memory several times
 * over (a few times its size in RSS); larger ones go as the
 * body of POST /recordings, which streams.
 */
export const MAX_STRING_RECORDING_BYTES = 8 * 1024 * 1024;
/**
 * One line of a recording: an event, or a file content in base64 (the largest
 * file a workspace holds, 10 MiB, is 14 MiB of base64). A line is held whole
 * while it is parsed (a few copies of it): this bounds an import's memory
 * whatever the recording's size.
 */
export const MAX_RECORDING_LINE_BYTES = 16 * 1024 * 1024;
/**
 * Distinct file contents one recording's change sets may name. The validator
 * keeps each named one (32 bytes and a map entry, about 80 bytes of heap) until
 * the recording ends, since its content may come in any later line: this bounds
 * that map at about 80 MB whatever the recording's size.
 */
export const MAX_RECORDING_CONTENTS = 1_000_000;

export const recordingHeaderSchema = z.strictObject({
  format: z.literal(RECORDING_FORMAT),
  version: z.literal(FORMAT_VERSIONS),
  session: z.strictObject({
    id: idSchema,
    title: titleSchema.nullish(),
    /** The external runner pool that ran it (absent: forkline's own agent); the imported session keeps it. */
    runner: runnerPoolSchema.nullish(),
  }),
});
export type RecordingHeader = z.infer<typeof recordingHeaderSchema>;

/** The years a stored time may have: Postgres has no year 0, and toISOString writes a year past 9999 in another form. */
const FIRST_TIME = Date.parse('0001-01-01T00:00:00Z');
const PAST_LAST_TIME = Date.parse('+010000-01-01T00:00:00Z');

/**
 * An event's time as a recording line gives it, made UTC (`…Z`): any offset ISO 8601 allows (Postgres refuses one
 * past ±15:59) and any year Postgres stores, or the line is refused with its rule instead of failing the import's write.
 */
const recordedTime = z.iso
  .datetime({ offset: true })
  .transform((text) => Date.parse(text))
  .refine((ms) => ms >= FIRST_TIME && ms < PAST_LAST_TIME, 'must lie in the years 0001 to 9999 (UTC)')
  .transform((ms) => new Date(ms).toISOString());

export const recordingLineSchema = z.strictObject({
  seq: z.number().int().nonnegative(),
  type: z.string(),
  data: z.unknown(),
  createdAt: recordedTime.optional(),
  inherited: z.boolean().optional(),
  synthetic: z.boolean().optional(),
});

/** A file content a recording carries (after its events): the store checks the hash on import. */
export const recordingBlobSchema = z.strictObject({
  blob: z.string().regex(/^[0-9a-f]{64}$/, 'a sha-256 in lowercase hex'),
  base64: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'base64'),
});
export type RecordingBlob = z.infer<typeof recordingBlobSchema>;

/** One validated event line: `data` is the decoded original (fork ids and wording kept). */
export interface RecordingEvent extends LogEvent {
  createdAt?: string;
  inherited: boolean;
  synthetic: boolean;
}

/** What a whole valid recording says about the session it describes. */
export interface RecordingSummary {
  header: RecordingHeader;
  eventCount: number;
  turnCount: number;
  /** The log ends inside an open turn (a crashed session): import repairs it. */
  openTurn: boolean;
  /** That turn waits for a tool call's approval (docs/contract.md#tool-approval): import keeps it waiting. */
  waiting: boolean;
  /** Its last ended turn failed (turn/end reason failed). */
  lastTurnFailed: boolean;
  /** The model its last session/model sets (inherited prefix included); undefined: none. */
  model?: { provider: string; model: string };
  /** Inputs added to the inbox and never removed: queued for the session's agent. */
  pendingInputs: number;
  /** What they weigh (core/log-state.ts inputBytes): the session row keeps it for the inbox's byte bound. */
  pendingInputBytes: number;
  /** Last `session/title` of the log, if any. */
  lastTitle?: string;
  /** From the session's own marker, when the recording is of a fork. */
  fork?: { forkedAtSeq: number; inheritedEventCount: number; firstLiveSeq: number };
  /** File contents the recording carries after its events. */
  fileBlobs?: number;
}

/** The line of a recording that holds the event at `seq` (the header is line 1; events follow in seq order, one a line). */
export const lineOfSeq = (seq: number) => seq + 2;

const fail = (line: number, rule: string, detail: string) => new ForklineError('BAD_USER_INPUT', `line ${line}: ${rule}: ${detail}`, { line, rule });

const describeIssues = (error: z.ZodError) => error.issues.map((i) => `${i.path.join('.') || 'line'}: ${i.message}`).join('; ');

function parseHeader(value: unknown, line: number): RecordingHeader {
  const v = value as Partial<Record<string, unknown>> | null;
  if (typeof v !== 'object' || v === null || v.format !== RECORDING_FORMAT) {
    throw fail(line, 'header', `not a forkline recording (the first line must be {"format": "${RECORDING_FORMAT}", "version": …, "session": …})`);
  }
  if (!(FORMAT_VERSIONS as readonly unknown[]).includes(v.version)) {
    throw fail(line, 'header', `unknown format version ${JSON.stringify(v.version)} (supported: ${FORMAT_VERSIONS.join(', ')})`);
  }
  const unstorable = unstorableReason(v);
  if (unstorable) throw fail(line, 'header', unstorable);
  const r = recordingHeaderSchema.safeParse(v);
  if (!r.success) throw fail(line, 'header', describeIssues(r.error));
  return r.data;
}

/** A sha-256 in hex as its 32 bytes, one character each (anything else as it is). */
const contentKey = (hash: string) => (/^[0-9a-f]{64}$/.test(hash) ? Buffer.from(hash, 'hex').toString('latin1') : hash);

/**
 * Streaming validator: feed the lines one at a time with `push`, then call
 * `finish`. It keeps only what is open (pending inputs, the open turn and step
 * with its calls), never the log. Rules, each named in its error:
 * - `invalid JSON`, `header`, `event shape`, `codec` (the header version's codec);
 * - `seq order`: seqs are 0, 1, 2, … contiguous;
 * - `turn bracket` / `turn numbering`: one open turn at a time, numbered previous + 1;
 * - `step bracket` / `step numbering`: step events only inside the open turn's open
 *   step, steps increasing within a turn, the step ended before its turn;
 * - `unanswered call`: a step ends `completed` only once each of its calls has a result;
 * - `result pairing`: a tool/result answers a call of the open step with the same
 *   (turn, step) that has no earlier result; `call ids`: call ids unique per step;
 * - `inbox`: inbox/remove names a pending input, inbox/add a new one;
 * - `surface range`: surface/replace covers earlier events;
 * - `synthetic closer`: a synthetic result or end carries a repair cause;
 * - `call effect`: in a runner session's recording, a call of a tool its runner declared
 *   carries the declared effect (filled in when it has none), as the runner's append records it;
 * - `inherited prefix` / `marker placement`: inherited events form a prefix of the
 *   log; every session/end-seed sits at seq = its inheritedEventCount = cutSeq + 1
 *   with only inherited events before it (ancestor markers are copied inside the
 *   prefix, docs/contract.md#exact-fork); a non-empty inherited prefix is followed directly by the
 *   session's own marker, which is therefore its last.
 */
export class RecordingValidator {
  #line = 0;
  #header?: RecordingHeader;
  /** The one reducer (log-state.ts): its relationship rules are the recording's. */
  #state = Object.assign(new LogState(), { inputTexts: false });
  #inherited = 0;
  #ownStarted = false;
  #fork?: { forkedAtSeq: number; inheritedEventCount: number; firstLiveSeq: number };
  #inSeed = false;
  #blobs = 0;
  /**
   * The contents the change sets name (by contentKey), each true once carried: a recording carries each named one at
   * most once, and nothing else. One map of the packed hashes, not two sets of hex: a recording naming a million
   * contents is held at about a third of what those took.
   */
  #named = new Map<string, boolean>();
  readonly #maxContents: number;
  #lastTurnFailed = false;
  /** The file content of the last line pushed, when it was one (undefined after an event line). */
  blob?: RecordingBlob;

  constructor(opts: { maxContents?: number } = {}) {
    this.#maxContents = opts.maxContents ?? MAX_RECORDING_CONTENTS;
  }

  /** Validates the next line: undefined for the header, else the event. */
  push(text: string): RecordingEvent | undefined {
    this.#line++;
    if (!this.#header && text.trim() === '') throw this.#fail('header', 'missing header line');
    // Counted before it is parsed: a line of 16 MiB may be 8 million values, a million levels or a million distinct keys (storable.ts).
    const refused = jsonTextRefusal(text);
    if (refused) throw this.#fail(refused.past === 'depth' ? 'depth' : 'size', refused.reason);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw this.#fail('invalid JSON', (err as Error).message);
    }
    if (!this.#header) {
      this.#header = parseHeader(value, this.#line);
      return undefined;
    }
    this.blob = undefined;
    if (typeof value === 'object' && value !== null && 'blob' in value) {
      const blob = recordingBlobSchema.safeParse(value);
      if (!blob.success) throw this.#fail('file content', describeIssues(blob.error));
      // Else a recording could store contents no tree holds, past every quota (docs/files.md#limits).
      const key = contentKey(blob.data.blob);
      const carried = this.#named.get(key);
      if (carried === undefined) throw this.#fail('file content', `${blob.data.blob} is named by no change set of the recording`);
      if (carried) throw this.#fail('file content', `${blob.data.blob} is carried twice`);
      this.#named.set(key, true);
      this.#blobs++;
      this.blob = blob.data;
      return undefined;
    }
    if (this.#blobs) throw this.#fail('file content', 'file contents come after every event');
    const shape = recordingLineSchema.safeParse(value);
    if (!shape.success) throw this.#fail('event shape', describeIssues(shape.error));
    const { seq, type, createdAt } = shape.data;
    if (seq !== this.#state.nextSeq) throw this.#fail('seq order', `expected seq ${this.#state.nextSeq}, got ${seq}`);
    let data: unknown;
    try {
      data = decodeEvent(type, shape.data.data, this.#header.version);
    } catch (err) {
      if (err instanceof ForklineError) throw this.#fail('codec', err.message);
      throw err;
    }
    // A runner session's calls carry the effects its runner declared, as its appends record them (docs/contract.md#agent-loop):
    // the same rule (core/runner-tools.ts), or a recording could relabel a call with side effects as safe to repeat.
    if (this.#header.session.runner != null && type === 'model/message') data = this.#withDeclaredEffects(type, data, seq);
    const event: RecordingEvent = {
      seq,
      type,
      data,
      ...(createdAt !== undefined ? { createdAt } : {}),
      inherited: shape.data.inherited ?? false,
      synthetic: shape.data.synthetic ?? false,
    };
    this.#checkPrefix(event);
    this.#checkMarker(event);
    const broken = this.#state.violation(event);
    if (broken) throw this.#fail(broken.rule, broken.detail);
    this.#state.apply(event);
    this.#trackSeed(event);
    if (event.type === FILES_CHANGE) {
      for (const c of (data as FilesChangeData).changes) {
        const key = c.hash && contentKey(c.hash);
        if (key && !this.#named.has(key)) this.#named.set(key, false);
      }
      if (this.#named.size > this.#maxContents) {
        throw this.#fail(
          'file content',
          `the recording's change sets name more than ${this.#maxContents} distinct file contents (FORKLINE_MAX_RECORDING_CONTENTS)`,
        );
      }
    }
    const end = dataOf(event, 'turn/end');
    if (end) this.#lastTurnFailed = end.reason === 'failed';
    return event;
  }

  /** The header, once its line is pushed. */
  get header(): RecordingHeader | undefined {
    return this.#header;
  }

  /** Inputs waiting in the inbox after the last event pushed (stored with each event). */
  get pendingInputCount(): number {
    return this.#state.pendingInputCount;
  }

  finish(): RecordingSummary {
    if (!this.#header) throw fail(1, 'header', 'the recording is empty');
    if (this.#inherited > 0 && !this.#ownStarted) {
      throw fail(this.#line, 'marker placement', "the inherited prefix is not followed by the session's own session/end-seed");
    }
    const state = this.#state;
    return {
      header: this.#header,
      eventCount: state.nextSeq,
      turnCount: state.turnCount,
      openTurn: state.openTurn !== undefined,
      waiting: state.openTurn !== undefined && state.waiting,
      lastTurnFailed: this.#lastTurnFailed,
      ...(state.model ? { model: { provider: state.model.provider, model: state.model.model } } : {}),
      pendingInputs: state.pendingInputCount,
      pendingInputBytes: state.pendingInputBytes,
      ...(state.title !== undefined ? { lastTitle: state.title } : {}),
      ...(this.#fork ? { fork: { ...this.#fork } } : {}),
      ...(this.#blobs ? { fileBlobs: this.#blobs } : {}),
    };
  }

  #withDeclaredEffects(type: string, data: unknown, seq: number): unknown {
    try {
      return withDeclaredEffects([{ type, data }], this.#state.runnerTools, seq)[0].data;
    } catch (err) {
      if (err instanceof ForklineError && typeof err.details?.rule === 'string') throw this.#fail(err.details.rule, err.message);
      throw err;
    }
  }

  #fail(rule: string, detail: string): ForklineError {
    return fail(this.#line, rule, detail);
  }

  #checkPrefix(e: RecordingEvent) {
    if (e.inherited) {
      if (this.#ownStarted) throw this.#fail('inherited prefix', 'an inherited event follows events of the session itself');
      this.#inherited++;
      return;
    }
    if (!this.#ownStarted) {
      this.#ownStarted = true;
      if (this.#inherited > 0 && e.type !== 'session/end-seed') {
        throw this.#fail('marker placement', `the inherited prefix (${this.#inherited} events) must be followed by the session's own session/end-seed`);
      }
    }
  }

  /** Fork markers (docs/contract.md#exact-fork): at seq = its inheritedEventCount = cutSeq + 1, after inherited events only. */
  #checkMarker(e: RecordingEvent) {
    const m = dataOf(e, 'session/end-seed');
    if (!m) return;
    if (m.inheritedEventCount !== e.seq || m.cutSeq !== e.seq - 1) {
      throw this.#fail('marker placement', `session/end-seed at seq ${e.seq} must have inheritedEventCount ${e.seq} and cutSeq ${e.seq - 1}`);
    }
    const before = this.#inherited - (e.inherited ? 1 : 0);
    if (before !== e.seq) throw this.#fail('marker placement', 'a session/end-seed must directly follow inherited events only');
  }

  /** The fork seed (docs/contract.md#exact-fork): the session's own marker and the synthetic closers right after it. */
  #trackSeed(e: RecordingEvent) {
    const m = dataOf(e, 'session/end-seed');
    if (m && !e.inherited) {
      this.#fork = { forkedAtSeq: m.cutSeq, inheritedEventCount: m.inheritedEventCount, firstLiveSeq: e.seq + 1 };
      this.#inSeed = true;
    } else if (this.#inSeed && e.synthetic) {
      this.#fork!.firstLiveSeq = e.seq + 1;
    } else {
      this.#inSeed = false;
    }
  }
}

/** A gzip member's first bytes (RFC 1952): a compressed recording, said so instead of only "not UTF-8". */
const isGzip = (bytes: Uint8Array) => bytes[0] === 0x1f && bytes[1] === 0x8b;
const GZIPPED = ': it is gzip-compressed, and recordings are taken uncompressed (never inflated here: gunzip it first)';

/**
 * Splits a recording into lines as it arrives — a string, text chunks, or
 * byte chunks (an upload) — never holding more than one line besides the
 * current chunk. Bytes are decoded line by line, strictly: invalid UTF-8 is
 * rejected naming its line, never stored as U+FFFD. A final newline ends the
 * last line; CRLF is accepted. Rejects recordings over `maxBytes` and, as soon
 * as a line grows past it (before it is held whole), lines over `maxLineBytes`.
 */
export async function* recordingLines(
  source: string | Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>,
  maxBytes = MAX_RECORDING_BYTES,
  maxLineBytes = MAX_RECORDING_LINE_BYTES,
): AsyncGenerator<string> {
  let bytes = 0;
  let line = 0;
  let rest = '';
  let restBytes: Uint8Array[] = [];
  /** Bytes of the line being read so far (before its newline). */
  let pending = 0;
  const strip = (l: string) => (l.endsWith('\r') ? l.slice(0, -1) : l);
  const tooLong = () => fail(line + 1, 'size', `a line is longer than the limit of ${maxLineBytes} bytes per line (FORKLINE_MAX_RECORDING_LINE_BYTES)`);
  const decode = (parts: Uint8Array[]) => {
    const bytes = parts.length === 1 ? parts[0] : Buffer.concat(parts);
    const text = decodeUtf8(bytes);
    if (text === undefined) throw fail(line, 'encoding', `the line ${INVALID_UTF8}${line === 1 && isGzip(bytes) ? GZIPPED : ''}`);
    return text;
  };
  for await (const chunk of typeof source === 'string' ? [source] : source) {
    bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (bytes > maxBytes) throw fail(line + 1, 'size', `the recording exceeds the size limit of ${maxBytes} bytes`);
    // Only the new chunk is searched: a long line arriving in many chunks is scanned once.
    let start = 0;
    if (typeof chunk === 'string') {
      for (let nl = chunk.indexOf('\n'); nl !== -1; nl = chunk.indexOf('\n', start)) {
        const piece = chunk.slice(start, nl);
        if (pending + Buffer.byteLength(piece) > maxLineBytes) throw tooLong();
        const text = rest + piece;
        rest = '';
        pending = 0;
        line++;
        yield strip(text);
        start = nl + 1;
      }
      const piece = chunk.slice(start);
      pending += Buffer.byteLength(piece);
      if (pending > maxLineBytes) throw tooLong();
      rest += piece;
    } else {
      // A newline byte never occurs inside a multi-byte UTF-8 character.
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
        if (pending + (nl - start) > maxLineBytes) throw tooLong();
        line++;
        const text = decode([...restBytes, chunk.subarray(start, nl)]);
        restBytes = [];
        pending = 0;
        yield strip(text);
        start = nl + 1;
      }
      if (start < chunk.length) {
        pending += chunk.length - start;
        if (pending > maxLineBytes) throw tooLong();
        restBytes.push(chunk.subarray(start));
      }
    }
  }
  if (rest !== '') yield strip(rest);
  if (restBytes.length) {
    line++;
    yield strip(decode(restBytes));
  }
}

/**
 * V3 → V4: every event is kept unchanged, since V4 only widens V3 (docs/contract.md#exact-fork).
 * This is where a future version's migration of an event line would go.
 */
export function upgradeToV4(event: RecordingEvent): RecordingEvent {
  return event;
}

export function recordingHeader(
  session: { id: string; title?: string | null; runner?: string | null },
  version: FormatVersion = CURRENT_FORMAT_VERSION,
): RecordingHeader {
  // `runner` only when an external pool runs the session: other recordings read as before.
  const runner = session.runner != null ? { runner: session.runner } : {};
  return { format: RECORDING_FORMAT, version, session: { id: session.id, title: session.title ?? null, ...runner } };
}

/** One event as a recording line; optional fields are written only when they say something. */
export function recordingLine(e: LogEvent & { createdAt?: Date | string }): string {
  return JSON.stringify({
    seq: e.seq,
    type: e.type,
    data: e.data,
    createdAt: e.createdAt instanceof Date ? e.createdAt.toISOString() : e.createdAt,
    inherited: e.inherited || undefined,
    synthetic: e.synthetic || undefined,
  });
}

/** The recording as newline-terminated lines: the header, then the events in order, then the file contents they name. */
export async function* exportLines(
  header: RecordingHeader,
  events: Iterable<LogEvent & { createdAt?: Date | string }> | AsyncIterable<LogEvent & { createdAt?: Date | string }>,
  blobs: () => AsyncIterable<RecordingBlob> = async function* () {},
): AsyncGenerator<string> {
  yield `${JSON.stringify(header)}\n`;
  for await (const e of events) yield `${recordingLine(e)}\n`;
  for await (const b of blobs()) yield `${JSON.stringify({ blob: b.blob, base64: b.base64 })}\n`;
}
