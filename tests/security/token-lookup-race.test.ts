// A token revoked while its first lookup is under way (docs/operations.md
// "API tokens"): the lookup read the token live before the revocation
// committed and answered after the revocation had cleared the cache, so the
// answer put the token back as live — its request and the next ones until the
// next verification were served (before: that request was a 200). A token whose
// expiry passes while it is cached is refused at once, with no verification.
//
// The lookup is held by a real lock: a view stands in for the "ApiToken" table,
// and its condition makes only the lookup's statement (`SELECT digest …`) wait,
// after it has taken its snapshot, on an advisory lock the test holds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { locker } from '../helpers/locked-reads.ts';
import { waitFor } from '../helpers/wait.ts';

const ADMIN = 'race-bootstrap-0123456789abcdef';
const LOCK = 4747;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const CREATE = 'mutation($input: CreateApiTokenInput!) { createApiToken(input: $input) { secret token { id } } }';
const REVOKE = 'mutation($id: ID!) { revokeApiToken(id: $id) { id status } }';
/** The text of the lookups and verifications only (src/store/api-tokens.ts `verify`). */
const LOOKUP = 'SELECT digest';

let app: TestApp;
let hold: Awaited<ReturnType<typeof locker>>;

beforeAll(async () => {
  app = await startTestApp({ security: { apiTokens: new Map([[ADMIN, 'alpha']]), rateLimit: false } });
  await app.db.pool.query(`CREATE FUNCTION test_hold_lookup() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
      IF strpos(current_query(), '${LOOKUP}') > 0 THEN PERFORM pg_advisory_xact_lock_shared(${LOCK}); END IF;
      RETURN true;
    END $$`);
  // A simple view is updatable: creating and revoking tokens go through it unchanged.
  await app.db.pool.query(`ALTER TABLE "ApiToken" RENAME TO "ApiTokenRows"`);
  await app.db.pool.query(`CREATE VIEW "ApiToken" AS SELECT * FROM "ApiTokenRows" WHERE test_hold_lookup()`);
  hold = await locker(app.db.url);
});
afterAll(async () => {
  await hold?.end();
  await app?.close();
});

async function createToken(input: Record<string, unknown>): Promise<{ secret: string; id: string }> {
  const r = await app.gql(CREATE, { input }, bearer(ADMIN));
  expect(r.errors).toBeUndefined();
  return { secret: r.data.createApiToken.secret, id: r.data.createApiToken.token.id };
}

const status = async (secret: string) => (await app.gql('{ __typename }', {}, bearer(secret))).status;
const lookupsWaiting = () => hold.waiting(undefined, LOOKUP);

describe('a token revoked while its first lookup is under way', () => {
  it('is refused: the request that was waiting for the lookup, and the next', async () => {
    const { secret, id } = await createToken({ name: 'raced', scopes: ['READ'] });
    await hold.lock(`SELECT pg_advisory_xact_lock(${LOCK})`);
    const first = status(secret);
    await waitFor(async () => (await lookupsWaiting()) === 1, { what: "the token's first lookup waiting, its snapshot taken" });

    const revoked = await app.gql(REVOKE, { id }, bearer(ADMIN));
    expect(revoked.data?.revokeApiToken).toMatchObject({ id, status: 'REVOKED' });
    await hold.release();

    expect(await first).toBe(401);
    expect(await status(secret)).toBe(401);
  });
});

describe('a token whose expiry passes while it is cached', () => {
  it('is refused at once, while no verification can answer', async () => {
    const expiresAt = Date.now() + 1500;
    const { secret } = await createToken({ name: 'short', scopes: ['READ'], expiresAt: new Date(expiresAt).toISOString() });
    expect(await status(secret)).toBe(200);
    // From here every verification waits: what the cache answers, it answers by itself.
    await hold.lock(`SELECT pg_advisory_xact_lock(${LOCK})`);
    try {
      await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now() + 50)));
      expect(await status(secret)).toBe(401);
    } finally {
      await hold.release();
    }
  });
});
