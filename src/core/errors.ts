/** Error codes of the GraphQL contract (docs/contract.md#graphql-names). */
export const ERROR_CODES = [
  'SESSION_NOT_FOUND',
  'SEQ_OUT_OF_RANGE',
  'BAD_USER_INPUT',
  'SESSION_BUSY',
  'SESSION_HAS_CHILDREN',
  /** An external runner's lease is no longer its own (expired and claimed by another, released, or a wrong token): it wrote nothing. */
  'LEASE_LOST',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'RATE_LIMITED',
  /** Retryable: the database is unreachable or out of connections (HTTP 503 with Retry-After). */
  'SERVICE_UNAVAILABLE',
  /** A subscription ended because its subscriber fell too far behind (it subscribes again). */
  'SUBSCRIBER_TOO_SLOW',
  /** The operation's database work passed its time bound (FORKLINE_QUERY_TIMEOUT_MS and its neighbours) and was cancelled: narrow it or retry. */
  'QUERY_TIMEOUT',
  /** The session's model provider refused or failed a request the operation needed (compactSession): the message is the provider's. */
  'MODEL_ERROR',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

// Codes of the service's own limits, besides the contract's (docs/operations.md "Errors and logs"). Written once,
// here: the schema's plugins and the HTTP doors both answer with them, and neither room imports the other
// (ARCHITECTURE.md).
/** A response, subscription event, /chat chunk or AG-UI event over FORKLINE_MAX_RESPONSE_BYTES: it is not sent. */
export const RESPONSE_TOO_LARGE = 'RESPONSE_TOO_LARGE';
/** A request past a size bound: its body, its JSON's values, or what it holds while it lives (yoga's own code for a body too large). */
export const REQUEST_TOO_LARGE = 'REQUEST_ENTITY_TOO_LARGE';

/** An error meant for the user: its message and code reach the client unmasked. */
export class ForklineError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'ForklineError';
  }
}

export const badInput = (message: string, details?: Record<string, unknown>) => new ForklineError('BAD_USER_INPUT', message, details);

export const sessionNotFound = (id: string) => new ForklineError('SESSION_NOT_FOUND', `session ${id} not found`, { sessionId: id });
