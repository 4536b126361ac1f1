// Idempotency keys (issue: a client whose response was lost retries, and the
// retry must not fork twice or send a message twice). A key is written in the
// same transaction as the mutation's effect, so either both exist or neither;
// a retry finds it and gets the first result. Two calls racing with one key:
// the second's insert waits for the first's transaction and then fails on the
// key (23505), and it too answers with the first result. An import, long, claims its key as its transaction
// begins (claim): the second waits there for the first's commit instead of importing the whole recording too.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { badInput } from '../core/errors.ts';
import type { Scope } from './session-store.ts';

/** Keys are kept this long at least (then pruned). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** One idempotent call: where to record it, and what to compare a retry with. */
export interface IdempotentCall {
  scope: Scope;
  key: string;
  operation: string;
  requestHash: string;
}

export const requestHash = (input: unknown) =>
  createHash('sha256')
    .update(JSON.stringify(input ?? null))
    .digest('hex');

export class IdempotencyStore {
  constructor(private readonly pool: pg.Pool) {}

  /** The first call's result, when this key was used; BAD_USER_INPUT when it was used for another request. */
  async find(call: IdempotentCall, db: Pick<pg.Pool, 'query'> = this.pool): Promise<unknown | undefined> {
    const { rows } = await db.query<{ operation: string; requestHash: string; result: unknown }>(
      'SELECT operation, "requestHash", result FROM "IdempotencyKey" WHERE tenant = $1 AND key = $2',
      [call.scope.tenant, call.key],
    );
    const prior = rows[0];
    if (!prior) return undefined;
    if (prior.operation !== call.operation || prior.requestHash !== call.requestHash) {
      throw badInput(`idempotencyKey "${call.key}" was already used for a different request (${prior.operation}); use a new key for a new request`, {
        idempotencyKey: call.key,
      });
    }
    return prior.result;
  }

  /** Records the call's result inside the mutation's transaction. */
  async record(client: pg.PoolClient, call: IdempotentCall, result: unknown): Promise<void> {
    await client.query('INSERT INTO "IdempotencyKey" (tenant, key, operation, "requestHash", result) VALUES ($1, $2, $3, $4, $5)', [
      call.scope.tenant,
      call.key,
      call.operation,
      call.requestHash,
      JSON.stringify(result),
    ]);
  }

  /**
   * Inside a mutation's transaction, before its work: waits for any other transaction working under the same key
   * (another process's, held to its commit) and answers the result it committed, if one did. A long import that
   * claims its key first does not do its whole work only to roll back at the key's insert.
   */
  async claim(client: pg.PoolClient, call: IdempotentCall): Promise<unknown | undefined> {
    await client.query(`SELECT pg_advisory_xact_lock(hashtextextended('IdempotencyKey:' || $1 || E'\\n' || $2, 0))`, [call.scope.tenant, call.key]);
    return this.find(call, client);
  }

  /** Removes a key with the effect it recorded (an import undone because its caller went before its answer). */
  async forget(client: pg.PoolClient, scope: Scope, key: string): Promise<void> {
    await client.query('DELETE FROM "IdempotencyKey" WHERE tenant = $1 AND key = $2', [scope.tenant, key]);
  }

  async prune(olderThanMs = IDEMPOTENCY_TTL_MS): Promise<number> {
    const { rowCount } = await this.pool.query(`DELETE FROM "IdempotencyKey" WHERE "createdAt" < now() - $1 * interval '1 millisecond'`, [olderThanMs]);
    return rowCount ?? 0;
  }
}

/** The key's row already exists: another call with the same key committed first. */
export const isDuplicateKey = (err: unknown) =>
  (err as { code?: string; constraint?: string }).code === '23505' && (err as { constraint?: string }).constraint === 'IdempotencyKey_pkey';
