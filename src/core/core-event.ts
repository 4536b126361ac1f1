// Exhaustive switches over a core event's type (ARCHITECTURE "A new event type").
// Types only from events.ts: the dashboard imports this, and events.ts's zod
// codecs would probe eval (new Function) in a page whose CSP forbids it.
import type { CoreEventType, EventData, LogEvent } from './events.ts';

/** A logged event seen as one of the core types, its `data` typed by its `type`: what a per-type switch takes. */
export type CoreEvent = { [T in CoreEventType]: Omit<LogEvent, 'type' | 'data'> & { type: T; data: EventData<T> } }[CoreEventType];

/**
 * Views a logged event as a core event for a switch over its type. No check:
 * the store validated it, and plugin events reach the switch's `default`.
 */
export const asCoreEvent = (e: LogEvent): CoreEvent => e as CoreEvent;

/**
 * The `default` of a switch over a core event's type, which lists every core
 * type: at run time only plugin events reach it (core code never classifies
 * them). Its parameter is `never`, so a new core type that a switch does not
 * list fails type-checking there, in every place that must handle it.
 */
export function otherThanCore(_e: never): void {}

/**
 * `e`'s data when `e` is of the core type `type`, else undefined: a lookup of
 * one type (the first turn/start, the session's model) without a switch.
 */
export function dataOf<T extends CoreEventType>(e: Pick<LogEvent, 'type' | 'data'> | null | undefined, type: T): EventData<T> | undefined {
  // The one cast, as asCoreEvent's: the store validated data against its type's schema.
  return e?.type === type ? (e.data as EventData<T>) : undefined;
}

/**
 * A field of any event's data, core or plugin (`turn`, `inputId`), unknown
 * until the caller checks it.
 */
export function fieldOf(e: Pick<LogEvent, 'data'>, name: string): unknown {
  const d = e.data;
  return typeof d === 'object' && d !== null && !Array.isArray(d) ? (d as Record<string, unknown>)[name] : undefined;
}
