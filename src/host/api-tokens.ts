// Stored API tokens for the service: the tenant admin's use cases
// (create, list, revoke) and the verified tokens every request is checked
// against without a database round trip.
//
// Why a cache with a short refresh and not a lookup per request: a request's
// caller is settled synchronously by the request gate, and a statement per
// request would cost every request a round trip. Every digest used recently
// (or held by an open socket or stream) is verified again in one statement
// every `refreshMs`, by every process, so a revocation or an expiry anywhere
// takes effect everywhere within about that long; a revocation in this
// process takes effect at once. What a refresh finds gone is reported to the
// watchers (http/token-connections.ts closes that token's sockets and streams).
//
// Answers are ordered by when their question was asked, not by when they
// arrive: a lookup that began before a revocation here read the token live,
// and its answer must not undo the revocation (docs/operations.md "API tokens").
import { badInput } from '../core/errors.ts';
import { requireScope, type Caller, type TokenScope } from '../core/api-tokens.ts';
import type { ApiTokenRow, ApiTokenStore, StoredCredential } from '../store/api-tokens.ts';

/** How often the tokens in use are verified again (and so how long a revocation elsewhere may take). */
export const TOKEN_REFRESH_MS = 1000;
/** A token nobody used for this long is forgotten (looked up again on its next use). */
const FORGET_AFTER_MS = 60_000;
/** Unknown digests remembered at most (a client trying random tokens). */
const MAX_UNKNOWN = 10_000;
/** `apiTokens` answers the newest this many. */
export const MAX_LISTED_TOKENS = 500;

interface Entry {
  /** null: no live token has this digest. */
  credential: StoredCredential | null;
  checkedAt: number;
  /** The `order` of the verification (or revocation) that answered last. */
  answeredBy: number;
  usedAt: number;
  watchers: Set<() => void>;
}

export interface ApiTokensOptions {
  refreshMs?: number;
  /** Live tokens (neither revoked nor expired) one tenant may hold; unset: no cap. */
  maxLivePerTenant?: number;
  log?: (msg: string, err?: unknown) => void;
}

export class ApiTokens {
  /** A live stored token existed at start: authentication is on even without environment tokens. */
  inUse = false;
  private readonly entries = new Map<string, Entry>();
  private readonly lookups = new Map<string, Promise<void>>();
  private readonly used = new Set<string>();
  private unknown = 0;
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  private readonly refreshMs: number;
  /** Counts the verifications and revocations begun: an answer older than the one an entry holds is dropped. */
  private order = 0;

  constructor(
    private readonly store: ApiTokenStore,
    private readonly opts: ApiTokensOptions = {},
  ) {
    this.refreshMs = opts.refreshMs ?? TOKEN_REFRESH_MS;
  }

  async start(): Promise<void> {
    this.inUse = await this.store.anyLive();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.refreshing;
  }

  // -- the request path ------------------------------------------------------

  /**
   * Looks a digest up when no recent verification answers for it; a promise only
   * then (the request waits for one statement), so a known token costs nothing.
   */
  lookUp(digest: string): Promise<void> | undefined {
    const e = this.entries.get(digest);
    if (e && Date.now() - e.checkedAt < 2 * this.refreshMs) return undefined;
    let pending = this.lookups.get(digest);
    if (!pending) {
      const at = Date.now();
      const asked = ++this.order;
      pending = this.store
        .verify([digest])
        .then((found) => this.settle(digest, found.get(digest) ?? null, at, asked))
        .finally(() => this.lookups.delete(digest));
      this.lookups.set(digest, pending);
    }
    return pending;
  }

  /** The live token of a digest as last verified (undefined: unknown, revoked, expired, or not looked up). */
  credential(digest: string): StoredCredential | undefined {
    const e = this.entries.get(digest);
    if (!e?.credential || expired(e.credential)) return undefined;
    e.usedAt = Date.now();
    this.used.add(e.credential.id);
    return e.credential;
  }

  /** Calls `onGone` once when the token of `digest` is revoked or expires; returns the way to stop watching. */
  watch(digest: string, onGone: () => void): () => void {
    const e = this.entries.get(digest);
    if (!e?.credential) {
      onGone();
      return () => {};
    }
    e.watchers.add(onGone);
    return () => void e.watchers.delete(onGone);
  }

  // -- the admin's use cases --------------------------------------------------

  /** A new token of the caller's tenant; the secret is in the answer and nowhere else. */
  async create(caller: Caller, input: { name: string; scopes: TokenScope[]; expiresAt: Date | null }): Promise<{ token: ApiTokenRow; secret: string }> {
    requireScope(caller, 'admin', 'creating API tokens');
    if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) throw badInput('expiresAt must be in the future', { field: 'expiresAt' });
    const limit = this.opts.maxLivePerTenant ?? Infinity;
    const created = await this.store.create({ tenant: caller.tenant, ...input }, limit);
    if (!created) {
      throw badInput(`this tenant has ${limit} live API tokens, its limit: revoke one (revokeApiToken) or let one expire first`, { limit });
    }
    return created;
  }

  async list(caller: Caller): Promise<ApiTokenRow[]> {
    requireScope(caller, 'admin', 'listing API tokens');
    return this.store.list(caller.tenant, MAX_LISTED_TOKENS);
  }

  /** Revokes a token of the caller's tenant; its requests are refused and its sockets closed from now on. */
  async revoke(caller: Caller, id: string): Promise<ApiTokenRow> {
    requireScope(caller, 'admin', 'revoking API tokens');
    const revoked = await this.store.revoke(caller.tenant, id);
    if (!revoked) throw badInput(`no API token ${id}`, { id });
    // Remembered as gone even when not cached: a lookup of it under way read it before the revocation.
    this.settle(revoked.digest, null, Date.now(), ++this.order);
    return revoked.token;
  }

  // -- keeping the cache true -------------------------------------------------

  /** Verifies every token in use again (one statement), forgets idle ones, reports the ones gone. */
  refresh(): Promise<void> {
    this.refreshing ??= this.verifyInUse()
      .catch((err) => this.opts.log?.('verifying API tokens failed', err))
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async verifyInUse(): Promise<void> {
    const now = Date.now();
    const asked = ++this.order;
    const digests: string[] = [];
    for (const [digest, e] of this.entries) {
      if (e.credential === null) {
        if (now - e.checkedAt >= 2 * this.refreshMs) this.forget(digest);
      } else if (!e.watchers.size && now - e.usedAt > FORGET_AFTER_MS) this.forget(digest);
      else digests.push(digest);
    }
    const ids = [...this.used];
    this.used.clear();
    if (!digests.length && !ids.length) return;
    const [found] = await Promise.all([this.store.verify(digests), this.store.touch(ids)]);
    for (const digest of digests) this.settle(digest, found.get(digest) ?? null, now, asked);
  }

  private settle(digest: string, credential: StoredCredential | null, checkedAt: number, answeredBy: number): void {
    const e = this.entries.get(digest);
    if (e && e.answeredBy > answeredBy) return; // a later verification or a revocation already answered
    if (!e) {
      if (credential === null && ++this.unknown > MAX_UNKNOWN) this.forgetUnknown();
      this.entries.set(digest, { credential, checkedAt, answeredBy, usedAt: checkedAt, watchers: new Set() });
      return;
    }
    if (e.credential === null && credential !== null) this.unknown--;
    if (e.credential !== null && credential === null) this.unknown++;
    e.credential = credential;
    e.checkedAt = checkedAt;
    e.answeredBy = answeredBy;
    if (credential === null || expired(credential)) {
      const watchers = [...e.watchers];
      e.watchers.clear();
      for (const gone of watchers) gone();
    }
  }

  private forget(digest: string): void {
    const e = this.entries.get(digest);
    if (e?.credential === null) this.unknown--;
    this.entries.delete(digest);
  }

  private forgetUnknown(): void {
    for (const [digest, e] of this.entries) if (e.credential === null) this.entries.delete(digest);
    this.unknown = 0;
  }
}

const expired = (c: StoredCredential) => c.expiresAt !== null && c.expiresAt.getTime() <= Date.now();
