// Pure formatting shared by the dashboard's views (no DOM, no client: tests import it).

/** A duration as people read it: `840 ms`, `2.4 s`, `3 min 5 s`. */
export const formatDuration = (ms: number) =>
  ms < 1000 ? `${ms} ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;

/** US dollars as the totals show them: cents from a dollar up, more digits below (a call costs fractions of a cent); – for unknown. */
export function formatUsd(usd: number | null | undefined): string {
  if (usd == null) return '–';
  if (usd === 0) return '$0';
  return usd >= 1 ? `$${usd.toFixed(2)}` : `$${usd.toPrecision(2)}`;
}
