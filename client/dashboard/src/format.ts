// Pure formatting shared by the dashboard's views (no DOM, no client: tests import it).
import { visibleText } from '../../../src/core/visible-text.ts';

/**
 * A short name from outside (a model's, a call id, a tool's) as a line shows it: its hidden characters as
 * escapes (docs/operations.md "Threat model") and at most `max` characters of it (a model name has no length
 * limit in the log: a megabyte of one would be a megabyte in every row that names it).
 */
export const shownName = (name: string, max = 200): string => visibleText(name.length > max ? `${name.slice(0, max - 1)}…` : name);

/** A duration as people read it: `840 ms`, `2.4 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  // Rounded once, so 119.6 s reads `2 min 0 s`, never `1 min 60 s`; hours and days past an hour (a session's time in turns).
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  const min = Math.round(s / 60);
  if (min < 24 * 60) return `${Math.floor(min / 60)} h ${min % 60} min`;
  const h = Math.round(min / 60);
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** US dollars as the totals show them: cents from a dollar up, more digits below (a call costs fractions of a cent); – for unknown. */
export function formatUsd(usd: number | null | undefined): string {
  if (usd == null) return '–';
  if (usd === 0) return '$0';
  return usd >= 1 ? `$${usd.toFixed(2)}` : `$${usd.toPrecision(2)}`;
}
