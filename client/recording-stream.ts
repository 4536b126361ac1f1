// A recording as it streams from GET /recordings (client.downloadRecording):
// what the dashboard's Export button and the CLI's `export` share. Progress
// counts event lines as the bytes pass, never holding the recording.

const NEWLINE = 10;

/** Newlines in a chunk of a JSON Lines stream (a line never holds a raw newline: JSON escapes it). */
export function newlines(chunk: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < chunk.length; i++) if (chunk[i] === NEWLINE) n++;
  return n;
}

/** Event lines read so far, from the lines read: the header line is not an event. */
export const eventLines = (lines: number) => Math.max(0, lines - 1);

/** Progress as a whole percentage of the announced event count (blob lines come after the events: it stops at 100). */
export const percentOf = (events: number, eventCount: number) => (eventCount ? Math.min(100, Math.floor((events / eventCount) * 100)) : 100);
