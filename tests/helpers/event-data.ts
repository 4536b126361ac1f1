// Tests read an event's fields without narrowing its type first: the
// assertions check the values. (Source code narrows with asCoreEvent or
// dataOf, src/core/core-event.ts.)
export const anyData = (e: { data: unknown }): any => e.data;
