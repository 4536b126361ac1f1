// A token's scopes per operation (core/api-tokens.ts): queries and
// subscriptions need `read`, mutations `write`; managing tokens (admin) is
// checked by host/api-tokens.ts itself. Refused before anything executes,
// with FORBIDDEN, on every path that executes (yoga, the fast lane, graphql-ws).
import { GraphQLError, getOperationAST, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { forbidden, grants, type TokenScope } from '../../core/api-tokens.ts';
import type { Context } from '../context.ts';
import { refuseOperation } from './refuse-operation.ts';

const NEEDED: Record<string, TokenScope> = { query: 'read', mutation: 'write', subscription: 'read' };

export function useScopes(): Plugin<Context> {
  const check = (args: ExecutionArgs): ExecutionResult | undefined => {
    const { caller } = args.contextValue as Context;
    const operation = getOperationAST(args.document, args.operationName)?.operation;
    const needed = operation && NEEDED[operation];
    if (!needed || grants(caller.scopes, needed)) return undefined;
    const err = forbidden(needed, `a ${operation}`);
    return { errors: [new GraphQLError(err.message, { extensions: { code: err.code } })] };
  };
  return refuseOperation(check);
}
