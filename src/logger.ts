// Logs (pino) on stdout: on a terminal, readable lines (pino-pretty, in
// process, no worker); otherwise one JSON object per line for collectors,
// errors under `err` with their stack, request ids under `requestId`.
import { pino, type DestinationStream, type Logger } from 'pino';
import { PinoPretty } from 'pino-pretty';

export type { Logger };

export interface LoggerOptions {
  /** Where records go (default stdout). */
  destination?: DestinationStream;
  /** Readable lines instead of JSON (default: when stdout is a terminal and no destination is given). */
  pretty?: boolean;
}

export function createLogger(level: string = 'info', opts: LoggerOptions = {}): Logger {
  const pretty = opts.pretty ?? (!opts.destination && Boolean(process.stdout.isTTY));
  const destination = pretty
    ? PinoPretty({
        destination: opts.destination ?? 1,
        sync: true,
        ...(opts.destination ? { colorize: false } : {}),
        ignore: 'pid,hostname,service',
        translateTime: 'SYS:HH:MM:ss.l',
      })
    : opts.destination;
  return pino({ level, base: { service: 'forkline', pid: process.pid } }, destination);
}

/** The `log(msg, err, fields)` shape the host and the GraphQL server take, as error-level records. */
/** Structured error log: a message, the error, and fields such as the request id. */
export type ErrorLog = (msg: string, err?: unknown, fields?: Record<string, unknown>) => void;

export function errorLogOf(logger: Logger): ErrorLog {
  return (msg, err, fields) => logger.error({ ...fields, ...(err !== undefined ? { err } : {}) }, msg);
}
