// Every error a client sees carries extensions.code (docs/contract.md#graphql-names). User errors
// keep their message; anything unexpected is masked and logged with a request id.
import { randomUUID } from 'node:crypto';
import { GraphQLError } from 'graphql';
import { PothosValidationError } from '@pothos/core';
import type { Plugin } from 'graphql-yoga';
import { ForklineError } from '../../core/errors.ts';
import { isDatabaseUnavailable, RETRY_AFTER_SECONDS } from '../../db/unavailable.ts';
import { StatementAbandonedError, StatementTimeoutError } from '../../db/statement-deadlines.ts';
import type { ErrorLog } from '../../logger.ts';
import { perDocument } from './per-document.ts';

/** Retryable, with the HTTP answer yoga gives it (503, Retry-After): the database is unreachable or full. */
export const serviceUnavailable = (path?: GraphQLError['path']) =>
  new GraphQLError('the database is unavailable or out of connections; retry shortly', {
    path,
    extensions: { code: 'SERVICE_UNAVAILABLE', http: { status: 503, headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } } },
  });

/**
 * How yoga marks a request error (GraphQL over HTTP): 400 under
 * application/graphql-response+json, 200 under application/json (`spec`).
 * Internal: yoga drops it from HTTP bodies, the WebSocket front (graphql-handler.ts) too.
 */
const REQUEST_ERROR_HTTP = { status: 400, spec: true } as const;

/** Marks `e` (in place where it can) as a refusal of the request as a whole, before anything runs. */
export function asRequestError(e: GraphQLError): GraphQLError {
  return e.extensions?.http ? e : withExtensions(e, { http: REQUEST_ERROR_HTTP });
}

/** A refusal of the request as a whole: BAD_USER_INPUT, and no `data` in the response. */
export const requestError = (message: string) => asRequestError(new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } }));

function withExtensions(e: GraphQLError, extensions: Record<string, unknown>): GraphQLError {
  // graphql-js's errors have a mutable extensions object; graphql-jit's (plugins/jit.ts) may have none, read-only.
  if (e.extensions && Object.isExtensible(e.extensions)) return (Object.assign(e.extensions, extensions), e);
  return new GraphQLError(e.message, {
    nodes: e.nodes,
    source: e.source,
    positions: e.positions,
    path: e.path,
    originalError: e.originalError,
    extensions: { ...e.extensions, ...extensions },
  });
}

const withPath = (e: GraphQLError, path: NonNullable<GraphQLError['path']>) =>
  new GraphQLError(e.message, { nodes: e.nodes, source: e.source, positions: e.positions, path, originalError: e.originalError, extensions: e.extensions });

function rootCause(error: unknown): unknown {
  let e = error;
  while (e instanceof GraphQLError && e.originalError && e.originalError !== e) e = e.originalError;
  return e;
}

// Postgres refuses text it cannot parse or store (U+0000, lone surrogates inside
// a recording's JSON): only client input carries such text (see also
// text-input.ts), and the failed statement wrote nothing.
const UNSTORABLE_TEXT = new Set(['22021', '22P02', '22P05']);

function postgresCode(error: unknown): string | undefined {
  for (let e = error, i = 0; e && typeof e === 'object' && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

export function maskError(log: ErrorLog) {
  return (error: unknown, message: string): Error => {
    const cause = rootCause(error);
    const path = error instanceof GraphQLError ? error.path : undefined;
    if (cause instanceof ForklineError) {
      return new GraphQLError(cause.message, { path, extensions: { code: cause.code, ...cause.details } });
    }
    if (cause instanceof PothosValidationError) {
      return new GraphQLError(cause.message, { path, extensions: { code: 'BAD_USER_INPUT' } });
    }
    // Thrown by a resolver, it keeps the field's path that graphql-js gave its wrapper.
    if (cause instanceof GraphQLError && cause.extensions?.code) return path && !cause.path ? withPath(cause, path) : cause;
    // graphql-js's own errors (parse, validation, variable coercion) carry no
    // originalError: they describe the client's request.
    // A request refused by status alone (yoga's CSRF check: 403) keeps that meaning.
    if (cause instanceof GraphQLError && !cause.originalError) {
      const status = (cause.extensions?.http as { status?: number } | undefined)?.status;
      const code = status === 403 ? 'FORBIDDEN' : 'BAD_USER_INPUT';
      return new GraphQLError(cause.message, { nodes: cause.nodes, path: cause.path, extensions: { ...cause.extensions, code } });
    }
    if (cause instanceof StatementTimeoutError) {
      return new GraphQLError(cause.message, { path, extensions: { code: 'QUERY_TIMEOUT', timeoutMs: cause.timeoutMs } });
    }
    // Its client has gone: nobody reads this answer, and nothing went wrong here.
    if (cause instanceof StatementAbandonedError) return new GraphQLError(cause.message, { path, extensions: { code: cause.code } });
    if (isDatabaseUnavailable(cause)) {
      log('database unavailable', cause, { path: path?.join('.') });
      return serviceUnavailable(path);
    }
    if (UNSTORABLE_TEXT.has(postgresCode(cause) ?? '')) {
      return new GraphQLError('the input contains text that cannot be stored (for example a NUL character, U+0000)', {
        path,
        extensions: { code: 'BAD_USER_INPUT' },
      });
    }
    const requestId = randomUUID();
    log('unexpected error', cause, { requestId });
    return new GraphQLError(message, { path, extensions: { code: 'INTERNAL_SERVER_ERROR', requestId } });
  };
}

/**
 * Errors raised before execution (syntax, validation, variable coercion) have no
 * code from graphql-js; they are the client's input errors.
 */
export function useInputErrorCodes(): Plugin {
  // Its validation hook only words the document's own errors.
  return perDocument({
    ...tagInputErrors(),
    // yoga's parsers throw plain errors for some malformed requests (GET
    // `variables=` that is not JSON): they are the client's, not ours.
    onRequestParse({ requestParser, setRequestParser }) {
      if (!requestParser) return;
      setRequestParser(async (request) => {
        try {
          return await requestParser(request);
        } catch (err) {
          if (err instanceof GraphQLError) throw err;
          throw new GraphQLError(`malformed request: ${(err as Error).message}`, { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } });
        }
      });
    },
  });
}

function tagInputErrors(): Plugin {
  const tag = (e: GraphQLError) => (e.extensions?.code ? e : withExtensions(e, { code: 'BAD_USER_INPUT' }));
  // The hooks each operation gets are made once, not per request.
  const validated: ReturnType<NonNullable<Plugin['onValidate']>> = ({ result, setResult }) => {
    if (result.length) setResult((result as GraphQLError[]).map(tag));
  };
  const executed: Extract<Awaited<ReturnType<NonNullable<Plugin['onExecute']>>>, object> = {
    onExecuteDone: ({ result, setResult }) => {
      if (!result || !('errors' in result) || !result.errors?.length) return;
      const errors = result.errors.map(tag);
      // A result without `data` is a request error (the variables did not
      // coerce, no such operation): the request was refused, not executed.
      setResult({ ...result, errors: 'data' in result ? errors : errors.map(asRequestError) });
    },
  };
  return {
    onValidate: () => validated,
    onExecute: () => executed,
  };
}
