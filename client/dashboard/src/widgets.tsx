// Small shared pieces of the dashboard's UI.
import type { ComponentChildren } from 'preact';

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (Array.isArray(err)) return err.map(errorText).join('; ');
  if (err && typeof err === 'object' && 'message' in err) return String((err as { message: unknown }).message);
  if (err && typeof err === 'object' && 'reason' in err) return `connection closed: ${String((err as { reason: unknown }).reason) || 'no reason'}`;
  return String(err);
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status.toLowerCase()}`}>{status === 'RUNNING' ? 'running' : 'idle'}</span>;
}

/** Marks inherited, synthetic or reason labels; `tone` picks the colour. */
export function Badge(props: { tone: string; title?: string; children: ComponentChildren }) {
  return (
    <span class={`badge ${props.tone}`} title={props.title}>
      {props.children}
    </span>
  );
}
