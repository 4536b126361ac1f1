import { randomUUID } from 'node:crypto';

/** Typed, globally unique ids: the prefix names the GraphQL type (see graphql/builder.ts). */
export const newSessionId = () => `ses_${randomUUID().replace(/-/g, '')}`;
export const newInputId = () => `in_${randomUUID().replace(/-/g, '')}`;

/**
 * An event's id as seen through a session (docs/contract.md#log): the same stored row read
 * through a parent and through a child has two ids. `evt_<session id without
 * its ses_ prefix>_<seq>`, readable and reversible.
 */
export const eventId = (sessionId: string, seq: number) => `evt_${sessionId.replace(/^ses_/, '')}_${seq}`;

export function parseEventId(id: string): { sessionId: string; seq: number } | undefined {
  const m = /^evt_(.+)_(\d{1,10})$/.exec(id);
  if (!m) return undefined;
  const seq = Number(m[2]);
  return Number.isSafeInteger(seq) && seq < 2 ** 31 ? { sessionId: `ses_${m[1]}`, seq } : undefined;
}
