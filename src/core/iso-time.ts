// A date's ISO 8601 text, exactly as Date.prototype.toISOString writes it,
// for the dates responses carry by the hundred (an events page's createdAt).
// toISOString formats every field each time (about half a microsecond here);
// dates of one page mostly share their second, so the text up to the
// milliseconds is kept for the last second formatted and only the
// milliseconds are appended.

/** 'mmmZ' for each millisecond. */
const MILLIS = Array.from({ length: 1000 }, (_, ms) => `${String(ms).padStart(3, '0')}Z`);
/** Past this (year 10000) toISOString writes a signed six-digit year: left to it, as is every date before 1970. */
const FOUR_DIGIT_YEARS_END = Date.UTC(10000, 0, 1);

let second = NaN;
/** 'YYYY-MM-DDTHH:MM:SS.' of `second`. */
let prefix = '';

/** `date.toISOString()`: the same text, and the same RangeError for an invalid date. */
export function isoTime(date: Date): string {
  const t = date.getTime();
  if (!(t >= 0 && t < FOUR_DIGIT_YEARS_END)) return date.toISOString();
  const s = Math.floor(t / 1000);
  if (s !== second) {
    const text = date.toISOString();
    second = s;
    prefix = text.slice(0, 20);
    return text;
  }
  return prefix + MILLIS[t - s * 1000];
}
