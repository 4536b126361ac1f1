// The statement scope of a request at an HTTP door that is not a GraphQL
// operation (GET /recordings, /agui, /chat; GET /sessions/<id>/events's
// conditional read): its reads are bounded by FORKLINE_QUERY_TIMEOUT_MS and
// cancelled once its client has gone, as a GraphQL query's are
// (graphql/plugins/statement-deadlines.ts; docs/operations.md "Memory and
// time"). A door that answers at once bounds all its reads together; a door
// that streams for as long as its client listens (a recording's download, a
// run, a chat answer) bounds each statement on its own, as a subscription does.
import type http from 'node:http';
import { statementScope, type StatementBound, type StatementScope } from '../db/statement-deadlines.ts';
import { statementTimeoutsOf, type SecurityOptions } from './security.ts';
import { responseGone } from './client-gone.ts';

/** The scope of the request `res` answers; undefined when statements are not bounded (FORKLINE_STATEMENT_BOUNDS=off). */
export type DoorStatements = (res: http.ServerResponse, per: StatementBound['per']) => StatementScope | undefined;

export function doorStatements(security: SecurityOptions | undefined): DoorStatements {
  if (security?.statementBounds === false) return () => undefined;
  const { queryMs } = statementTimeoutsOf(security ?? {});
  const bounds: Record<StatementBound['per'], StatementBound> = {
    request: { timeoutMs: queryMs, per: 'request', setting: 'FORKLINE_QUERY_TIMEOUT_MS' },
    statement: { timeoutMs: queryMs, per: 'statement', setting: 'FORKLINE_QUERY_TIMEOUT_MS' },
  };
  return (res, per) => statementScope(bounds[per], responseGone(res));
}
