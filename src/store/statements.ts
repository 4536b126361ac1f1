// Hot statements, prepared once per connection (a named statement): Postgres
// skips parsing and planning on every later run, a real part of a short
// statement's round trip (the append bench shows it).
// Behind a transaction-mode pooler without protocol-level prepared statements
// (PgBouncer before 1.21), set DATABASE_PREPARED_STATEMENTS=false.
import type pg from 'pg';

/** Only statements whose best plan does not depend on the values are prepared (a generic plan guesses them). */
export function statement(prepare: boolean, name: string, text: string) {
  return (values: unknown[]): pg.QueryConfig => (prepare ? { name: `forkline_${name}`, text, values } : { text, values });
}
