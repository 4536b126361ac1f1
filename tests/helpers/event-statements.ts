// The statements on "Event" a GraphQL request runs, taken from the service's
// pool (AppOptions.onQuery): for tests of how many a read costs and what
// they read.
import type { TestApp } from './app.ts';
import { statementRecorder } from './explain.ts';

export function eventStatements() {
  const recorder = statementRecorder(/"Event"/);
  return {
    /** Pass as startTestApp's onQuery. */
    onQuery: recorder.onQuery,
    /** The GraphQL answer of `query`, and the statements on "Event" it ran. */
    async run(app: TestApp, query: string, variables: Record<string, unknown>) {
      let data: any;
      const sql = (await recorder.during(async () => (data = await app.ok(query, variables)))).map((s) => s.sql);
      return { data, sql };
    },
  };
}
