// Every error a client sees carries extensions.code (DESIGN §7). User errors
// keep their message; anything unexpected is masked and logged with a request id.
import { GraphQLError } from 'graphql';
import { PothosValidationError } from '@pothos/core';
import type { Plugin } from 'graphql-yoga';
import { ForklineError } from '../../core/errors.ts';

function rootCause(error: unknown): unknown {
  let e = error;
  while (e instanceof GraphQLError && e.originalError && e.originalError !== e) e = e.originalError;
  return e;
}

export function maskError(log: (msg: string, err: unknown) => void) {
  return (error: unknown, message: string): Error => {
    const cause = rootCause(error);
    const path = error instanceof GraphQLError ? error.path : undefined;
    if (cause instanceof ForklineError) {
      return new GraphQLError(cause.message, { path, extensions: { code: cause.code, ...cause.details } });
    }
    if (cause instanceof PothosValidationError) {
      return new GraphQLError(cause.message, { path, extensions: { code: 'BAD_USER_INPUT' } });
    }
    if (cause instanceof GraphQLError && cause.extensions?.code) return cause;
    // graphql-js's own errors (parse, validation, variable coercion) carry no
    // originalError: they describe the client's request.
    if (cause instanceof GraphQLError && !cause.originalError) {
      return new GraphQLError(cause.message, { nodes: cause.nodes, path: cause.path, extensions: { ...cause.extensions, code: 'BAD_USER_INPUT' } });
    }
    const requestId = Math.random().toString(36).slice(2, 10);
    log(`unexpected error (request ${requestId})`, cause);
    return new GraphQLError(message, { path, extensions: { code: 'INTERNAL_SERVER_ERROR', requestId } });
  };
}

/**
 * Errors raised before execution (syntax, validation, variable coercion) have no
 * code from graphql-js; they are the client's input errors.
 */
export function useInputErrorCodes(): Plugin {
  const tag = (errors: readonly GraphQLError[] | undefined) => {
    for (const e of errors ?? []) {
      if (!e.extensions?.code) (e.extensions as Record<string, unknown>).code = 'BAD_USER_INPUT';
    }
  };
  return {
    onValidate: () => ({ result }) => tag(result as GraphQLError[]),
    onExecute: () => ({
      onExecuteDone: ({ result }) => {
        if (result && 'errors' in result) tag(result.errors as GraphQLError[]);
      },
    }),
  };
}
