// Structured JSON logs (pino) on stdout: one object per line, errors under
// `err` with their stack, request ids under `requestId`.
import { pino, type DestinationStream, type Logger } from 'pino';
import type { ErrorLog } from './graphql/plugins/error-codes.ts';

export type { Logger };

export function createLogger(level: string = 'info', destination?: DestinationStream): Logger {
  return pino({ level, base: { service: 'forkline', pid: process.pid } }, destination);
}

/** The `log(msg, err, fields)` shape the host and the GraphQL server take, as error-level records. */
export function errorLogOf(logger: Logger): ErrorLog {
  return (msg, err, fields) => logger.error({ ...fields, ...(err !== undefined ? { err } : {}) }, msg);
}
