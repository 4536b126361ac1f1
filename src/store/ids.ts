import { randomUUID } from 'node:crypto';

/** Typed, globally unique ids: the prefix names the GraphQL type (see graphql/builder.ts). */
export const newSessionId = () => `ses_${randomUUID().replace(/-/g, '')}`;
export const newInputId = () => `in_${randomUUID().replace(/-/g, '')}`;
/** SQL expression generating an event id inside Postgres (copies never round-trip ids). */
export const EVENT_ID_SQL = `'evt_' || replace(gen_random_uuid()::text, '-', '')`;
