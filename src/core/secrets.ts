// Secrets forkline sends to servers outside — a model provider's key, the
// headers an MCP server's config gives it — kept out of what those servers'
// errors say before the text is recorded where a session's readers read it
// (docs/operations.md "Threat model"): a server that repeats what it was sent
// (a gateway's "Incorrect API key provided: sk-…", a 401 body quoting the
// Authorization header) would otherwise hand the operator's secret to every
// reader of the tenant's sessions. Pure.

/** What a secret is replaced with. */
export const REDACTED = '[redacted]';
/** Shorter values (a placeholder key such as "none", a header such as "1") are not taken for secrets. */
const MIN_SECRET_LENGTH = 8;

/** The secrets a header's value carries: the value, and the credential of `<scheme> <credential>` (`Bearer sk-…`). */
export function headerSecrets(value: string): string[] {
  const credential = /^\S+\s+(\S+)$/.exec(value.trim())?.[1];
  return credential === undefined ? [value] : [value, credential];
}

/** `text` with each of `secrets` (of MIN_SECRET_LENGTH characters or more) replaced by REDACTED. */
export function withoutSecrets(text: string, secrets: readonly string[]): string {
  return secrets.reduce((t, secret) => (secret.length >= MIN_SECRET_LENGTH ? t.replaceAll(secret, REDACTED) : t), text);
}
