// What the model's history holds of a session's log, in characters
// (docs/long-sessions.md "What a fold holds"). A log can hold megabytes per
// event (a recording's line, a runner's batch) and gigabytes in all, while a
// model's context window holds a few megabytes of text at most: the
// conversation the agent folds (model-request.ts) keeps at most
// MAX_HELD_EVENT_CHARS of one event's text and MAX_HELD_HISTORY_CHARS of
// history in all, so one request on such a session holds bounded memory. The
// log itself keeps every event whole. Pure.

/** The most one event's text (a message, a call's arguments, a tool result, a summary) the history holds: about 260,000 tokens. */
export const MAX_HELD_EVENT_CHARS = 1024 * 1024;

/**
 * The most text the history holds in all: about the largest context window
 * known (2,000,000 tokens at about four characters a token). An agent's own
 * turns compact before it (at FORKLINE_COMPACT_AT of the window); a log
 * written in bulk without a compaction keeps its newest history within it.
 */
export const MAX_HELD_HISTORY_CHARS = 8 * 1024 * 1024;

/** Whether a UTF-16 code unit is the second half of a surrogate pair (a cut there would split a character). */
const isLowSurrogate = (s: string, i: number) => {
  const c = s.charCodeAt(i);
  return c >= 0xdc00 && c <= 0xdfff;
};

/**
 * A copy of `s` that holds only its own characters: a slice of a string can
 * keep the whole string it came from alive (V8's sliced strings), which is
 * what clipping must not do.
 */
const ownCopy = (s: string): string => JSON.parse(JSON.stringify(s)) as string;

/** The line standing for what an event's text left out. */
const leftOutNote = (seq: number, omitted: number, max: number) =>
  `\n[… ${omitted} characters of event ${seq} left out here: the model's history holds at most ${max} characters of one event …]\n`;

/**
 * `text` as the history holds it: itself when within `max` characters, else
 * its beginning and its end with a note of what was left out between them
 * (within `max` characters in all).
 */
export function heldText(text: string, seq: number, max = MAX_HELD_EVENT_CHARS): string {
  if (text.length <= max) return text;
  const room = max - leftOutNote(seq, text.length, max).length;
  let head = Math.max(0, Math.floor(room / 2));
  let tail = text.length - Math.max(0, room - head);
  if (head > 0 && isLowSurrogate(text, head)) head--;
  if (tail < text.length && isLowSurrogate(text, tail)) tail++;
  return ownCopy(`${text.slice(0, head)}${leftOutNote(seq, tail - head, max)}${text.slice(tail)}`);
}

/** The system message standing for the earliest history the conversation no longer holds (MAX_HELD_HISTORY_CHARS). */
export const leftOutHistoryMessage = (throughSeq: number, messages: number, chars: number) =>
  `[Earlier conversation (events 0..${throughSeq}: ${messages} messages, ${chars} characters) is left out: ` +
  `the model's history holds at most ${MAX_HELD_HISTORY_CHARS} characters; the session's log keeps it whole.]`;
