// Whole transactions run again. A transaction Postgres aborted because of a
// concurrent one wrote nothing, and running it again from the start (a new
// snapshot, fresh reads) is the answer: a serialization failure under
// REPEATABLE READ (a fork whose parent row was deleted or locked after its
// snapshot) or a deadlock. Forks and deletion share this loop; appends retry
// differently (append.ts SessionAppends.checkAndAppend: the batch re-checked against a
// reloaded log state, then appended holding the row).

/** Postgres aborted the transaction for a concurrent one (serialization_failure, deadlock_detected). */
export function isTransactionConflict(err: unknown): boolean {
  const code = sqlStateOf(err);
  return code === '40001' || code === '40P01';
}

/** The SQLSTATE of an error Postgres raised (node-postgres puts it on the error). */
export function sqlStateOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Runs `attempt` until it succeeds, fails with an error `again` does not
 * accept, or has run `times` times (then its last error is thrown).
 */
export async function retried<T>(times: number, again: (err: unknown) => boolean, attempt: () => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (n >= times || !again(err)) throw err;
    }
  }
}
