// The statements on "Event" a GraphQL request runs, taken from the service's
// pool (AppOptions.onQuery): for tests of how many a read costs and what
// they read.
import type { TestApp } from './app.ts';

export function eventStatements() {
  let recording = false;
  const statements: string[] = [];
  return {
    /** Pass as startTestApp's onQuery. */
    onQuery: (sql: string) => {
      if (recording && /"Event"/.test(sql)) statements.push(sql);
    },
    /** The GraphQL answer of `query`, and the statements on "Event" it ran. */
    async run(app: TestApp, query: string, variables: Record<string, unknown>) {
      statements.length = 0;
      recording = true;
      try {
        const data = await app.ok(query, variables);
        return { data, sql: [...statements] };
      } finally {
        recording = false;
      }
    },
  };
}
