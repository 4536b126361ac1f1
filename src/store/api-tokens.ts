// API tokens as rows: a tenant's tokens with scopes, expiry and
// revocation. A token's secret is 256 random bits; only its sha-256 digest is
// stored, so the table (a backup, a log of its statements) never holds a usable
// credential, and a lookup by digest is one unique-index probe. A fast hash is
// enough for secrets this long: there is nothing to guess a password from.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { impliedScopes, type TokenScope } from '../core/api-tokens.ts';
import { inTransaction } from './transaction.ts';

/** What requests authenticate with: a token's digest (environment tokens are digested the same way). */
export const tokenDigest = (secret: string) => createHash('sha256').update(secret).digest('hex');

/** `fkt_` + 43 base64url characters: recognisable in a leaked config, no whitespace, longer than MIN_TOKEN_LENGTH. */
const newSecret = () => `fkt_${randomBytes(32).toString('base64url')}`;
/** Whether a bearer token could be a stored one: anything else is never looked up in the database. */
export const isStoredTokenShape = (token: string) => /^fkt_[A-Za-z0-9_-]{43}$/.test(token);
const newTokenId = () => `tok_${randomUUID().replace(/-/g, '')}`;

/** A token as its admins see it (never its secret or digest). */
export interface ApiTokenRow {
  id: string;
  tenant: string;
  name: string;
  scopes: TokenScope[];
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

/** A live token found by its digest: who its requests run as, and until when. */
export interface StoredCredential {
  id: string;
  tenant: string;
  scopes: TokenScope[];
  expiresAt: Date | null;
}

const COLUMNS = 'id, tenant, name, scopes, "createdAt", "expiresAt", "revokedAt", "lastUsedAt"';
/** A token that still works: neither revoked nor expired. */
const LIVE = '"revokedAt" IS NULL AND ("expiresAt" IS NULL OR "expiresAt" > now())';

export class ApiTokenStore {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * A new token; its secret is returned here and nowhere else. Undefined when
   * the tenant already holds `maxLive` live tokens (neither revoked nor
   * expired): creations of one tenant take turns (a transaction lock on the
   * tenant), so concurrent ones cannot pass the count together.
   */
  async create(
    input: { tenant: string; name: string; scopes: TokenScope[]; expiresAt: Date | null },
    maxLive = Infinity,
  ): Promise<{ token: ApiTokenRow; secret: string } | undefined> {
    const secret = newSecret();
    return inTransaction(this.pool, async (client) => {
      if (Number.isFinite(maxLive)) {
        await client.query(`SELECT pg_advisory_xact_lock(hashtextextended('ApiToken:' || $1, 0))`, [input.tenant]);
        const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM "ApiToken" WHERE tenant = $1 AND ${LIVE}`, [input.tenant]);
        if (rows[0].n >= maxLive) return undefined;
      }
      const { rows } = await client.query<ApiTokenRow>(
        `INSERT INTO "ApiToken" (id, tenant, name, digest, scopes, "expiresAt") VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
        [newTokenId(), input.tenant, input.name, tokenDigest(secret), impliedScopes(input.scopes), input.expiresAt],
      );
      return { token: rows[0], secret };
    });
  }

  /** The tenant's tokens, newest first (revoked and expired ones too, with their dates). */
  async list(tenant: string, limit: number): Promise<ApiTokenRow[]> {
    const { rows } = await this.pool.query<ApiTokenRow>(`SELECT ${COLUMNS} FROM "ApiToken" WHERE tenant = $1 ORDER BY "createdAt" DESC, id DESC LIMIT $2`, [
      tenant,
      limit,
    ]);
    return rows;
  }

  /**
   * Revokes a token of the tenant (once: a second revoke keeps the first date); undefined when the tenant has no
   * such token. With its digest, kept apart from the row its admins see, for the cache of verified tokens.
   */
  async revoke(tenant: string, id: string): Promise<{ token: ApiTokenRow; digest: string } | undefined> {
    const { rows } = await this.pool.query<ApiTokenRow & { digest: string }>(
      `UPDATE "ApiToken" SET "revokedAt" = COALESCE("revokedAt", now()) WHERE tenant = $1 AND id = $2 RETURNING ${COLUMNS}, digest`,
      [tenant, id],
    );
    if (!rows[0]) return undefined;
    const { digest, ...token } = rows[0];
    return { token, digest };
  }

  /** The live tokens among these digests (neither revoked nor expired), by digest: one statement for any number. */
  async verify(digests: string[]): Promise<Map<string, StoredCredential>> {
    const found = new Map<string, StoredCredential>();
    if (!digests.length) return found;
    const { rows } = await this.pool.query<StoredCredential & { digest: string }>(
      `SELECT digest, id, tenant, scopes, "expiresAt" FROM "ApiToken"
        WHERE digest = ANY($1::text[]) AND ${LIVE}`,
      [digests],
    );
    for (const { digest, ...credential } of rows) found.set(digest, credential);
    return found;
  }

  /** Records that these tokens were used (at most once a minute each). */
  async touch(ids: string[]): Promise<void> {
    if (!ids.length) return;
    await this.pool.query(
      `UPDATE "ApiToken" SET "lastUsedAt" = now() WHERE id = ANY($1::text[]) AND ("lastUsedAt" IS NULL OR "lastUsedAt" < now() - interval '1 minute')`,
      [ids],
    );
  }

  /** Whether any token is live: the service turns authentication on for stored tokens alone. */
  async anyLive(): Promise<boolean> {
    const { rows } = await this.pool.query(`SELECT 1 FROM "ApiToken" WHERE ${LIVE} LIMIT 1`);
    return rows.length > 0;
  }
}
