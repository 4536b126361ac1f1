// Every Postgres NOTIFY channel forkline uses, and the codec of each one's
// payload: the store and the host send on them, the listener (pg-listener.ts)
// subscribes to them, and live delivery (host/live/) decodes what arrives.
// Notifications are only wake-ups: the log stays the source of truth, so a
// payload that does not decode is dropped (a reader re-reads on reconnect).
import type pg from 'pg';

/** One notification per committed batch of appends: `{"s": sessionId, "last": seq}`. */
export const EVENTS_CHANNEL = 'forkline_events';
/** A session was created or forked: the payload is its id. */
export const SESSIONS_CHANNEL = 'forkline_sessions';
/** Deleted sessions: `{"tenant", "ids"}` per notification (split below the payload limit). */
export const DELETED_CHANNEL = 'forkline_deleted';
/** A cancel for whichever process runs the session: `{"cancel": sessionId}`. */
export const CONTROL_CHANNEL = 'forkline_control';
/** Input waits for a free slot somewhere: every process looks for work (no payload). */
export const WORK_CHANNEL = 'forkline_work';
/** Turn updates, which are not in the log: `{"n": serial, "u": updates}` (host/live/turn-update-relay.ts). */
export const TURNS_CHANNEL = 'forkline_turns';

/** The service took an external runner's lease (a user's cancel, a step's time limit): `{"tenant", "s", "t", "r", "why"}`. */
export const LEASES_CHANNEL = 'forkline_leases';

/** Every channel, in the order a listener LISTENs to them. */
export const ALL_CHANNELS = [EVENTS_CHANNEL, SESSIONS_CHANNEL, DELETED_CHANNEL, CONTROL_CHANNEL, TURNS_CHANNEL, WORK_CHANNEL, LEASES_CHANNEL];

/** NOTIFY is transactional: given a transaction's client, it is delivered at its commit. */
export async function notify(db: pg.Pool | pg.PoolClient, channel: string, payload: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [channel, payload]);
}

/** Postgres rejects NOTIFY payloads of 8000 bytes or more: ids per DELETED_CHANNEL payload. */
const MAX_DELETED_IDS = 100;

function parsed(payload: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(payload);
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export interface EventsCommitted {
  sessionId: string;
  lastSeq: number;
}

export function encodeEventsCommitted(m: EventsCommitted): string {
  return JSON.stringify({ s: m.sessionId, last: m.lastSeq });
}

/**
 * The same payload built in SQL, for an append whose own statement notifies
 * (store/append.ts): `sessionId` and `lastSeq` are SQL expressions.
 */
export function eventsCommittedSql(sessionId: string, lastSeq: string): string {
  return `pg_notify('${EVENTS_CHANNEL}', json_build_object('s', ${sessionId}, 'last', ${lastSeq})::text)`;
}

export function decodeEventsCommitted(payload: string): EventsCommitted | undefined {
  const m = parsed(payload);
  return typeof m?.s === 'string' && typeof m.last === 'number' ? { sessionId: m.s, lastSeq: m.last } : undefined;
}

export interface SessionsDeleted {
  tenant: string;
  ids: string[];
}

/** One payload per MAX_DELETED_IDS ids. */
export function encodeSessionsDeleted(tenant: string, ids: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < ids.length; i += MAX_DELETED_IDS) out.push(JSON.stringify({ tenant, ids: ids.slice(i, i + MAX_DELETED_IDS) }));
  return out;
}

export function decodeSessionsDeleted(payload: string): SessionsDeleted | undefined {
  const m = parsed(payload);
  if (typeof m?.tenant !== 'string' || !Array.isArray(m.ids)) return undefined;
  return { tenant: m.tenant, ids: m.ids.filter((id): id is string => typeof id === 'string') };
}

export function encodeCancel(sessionId: string): string {
  return JSON.stringify({ cancel: sessionId });
}

/** The session a CONTROL_CHANNEL payload cancels, if it is a cancel. */
export function decodeCancel(payload: string): string | undefined {
  const m = parsed(payload);
  return typeof m?.cancel === 'string' ? m.cancel : undefined;
}

/** An external runner's lease the service took: the session, the lease's token, the runner's id, and why. */
export interface LeaseTaken {
  tenant: string;
  sessionId: string;
  token: number;
  runnerId: string;
  reason: string;
}

export function encodeLeaseTaken(m: LeaseTaken): string {
  return JSON.stringify({ tenant: m.tenant, s: m.sessionId, t: m.token, r: m.runnerId, why: m.reason });
}

export function decodeLeaseTaken(payload: string): LeaseTaken | undefined {
  const m = parsed(payload);
  if (typeof m?.tenant !== 'string' || typeof m.s !== 'string' || typeof m.t !== 'number' || typeof m.r !== 'string' || typeof m.why !== 'string')
    return undefined;
  return { tenant: m.tenant, sessionId: m.s, token: m.t, runnerId: m.r, reason: m.why };
}

/**
 * `serial` keeps payloads distinct: Postgres folds identical payloads sent in one transaction into one.
 * `updates` come as their JSON already (the sender measured each): `JSON.stringify({ n, u })` of them.
 */
export function encodeTurnUpdates(serial: number, updates: readonly string[]): string {
  return `{"n":${serial},"u":[${updates.join(',')}]}`;
}

export function decodeTurnUpdates<T>(payload: string): T[] | undefined {
  const m = parsed(payload);
  return Array.isArray(m?.u) ? (m.u as T[]) : undefined;
}
