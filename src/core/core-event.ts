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
