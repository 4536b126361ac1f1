// "The database is unreachable or out of connections" (docs/contract.md#graphql-names:
// SERVICE_UNAVAILABLE, retryable) as opposed to an error in what was asked.
// One decision for the whole service: request errors become HTTP 503 with
// Retry-After, and agents wait and resume instead of failing their turn.

/** Seconds a client should wait before retrying while the database is away. */
export const RETRY_AFTER_SECONDS = 2;

/** SQLSTATEs of a server that is going away, starting, or has no room for us. */
const UNAVAILABLE_SQLSTATE = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, a fast shutdown)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down)
  '53300', // too_many_connections
  '53400', // configuration_limit_exceeded (role or database CONNECTION LIMIT)
  '55006', // object_in_use: the database is being dropped or recreated
]);

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

const MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|not queryable|Connection ended|server closed the connection|too many clients|terminating connection/i;

export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 6; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message, syscall } = e as { code?: unknown; message?: unknown; syscall?: unknown };
    if (typeof code === 'string') {
      if (UNAVAILABLE_SQLSTATE.has(code) || code.startsWith('08') || NETWORK_CODES.has(code)) return true;
      // A unix-domain socket whose server is stopped: its file is gone (the embedded database's, src/db/embedded.ts).
      if (code === 'ENOENT' && syscall === 'connect') return true;
    }
    if (typeof message === 'string' && MESSAGES.test(message)) return true;
  }
  return false;
}
