// `forkline tokens create|list|revoke` against a real server with an
// environment token (the bootstrap admin): the secret alone on stdout, lists
// without secrets, scopes, revocation, and the error codes on the way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { runCli } from '../helpers/cli.ts';

const ADMIN = 'cli-bootstrap-admin-0123456789';

let app: TestApp;

const cli = (args: string[], token: string) => runCli(app.url, args, { FORKLINE_TOKEN: token });
const lines = (s: string) => s.trim().split('\n').filter(Boolean);

beforeAll(async () => {
  app = await startTestApp({ security: { apiTokens: new Map([[ADMIN, 'acme']]), rateLimit: false } });
});
afterAll(() => app?.close());

describe('forkline tokens', () => {
  it('creates a token (its secret alone on stdout), lists it without the secret, and revokes it', async () => {
    const created = await cli(['tokens', 'create', 'ci runner', '--scope', 'write', '--expires', '30d'], ADMIN);
    expect(created.code).toBe(0);
    const secret = created.stdout.trim();
    expect(secret).toMatch(/^fkt_[A-Za-z0-9_-]{43}$/);
    expect(created.stderr).toMatch(/^tok_\w+\s+ACTIVE\s+read,write\s+expires \d{4}-.*ci runner\nthe secret above is shown only now/);
    const id = created.stderr.split(/\s/)[0];

    // The new token works as acme: it creates a session through the CLI's own commands.
    const session = await app.gql('mutation { createSession(input: { title: "acme" }) { id } }', undefined, { authorization: `Bearer ${secret}` });
    expect(session.errors).toBeUndefined();
    expect((await cli(['sessions'], secret)).stdout).toContain(session.data.createSession.id);

    const listed = await cli(['tokens', 'list', '--json'], ADMIN);
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(secret);
    const rows = lines(listed.stdout).map((l) => JSON.parse(l));
    expect(rows).toEqual([expect.objectContaining({ id, name: 'ci runner', scopes: ['READ', 'WRITE'], status: 'ACTIVE', revokedAt: null })]);

    const revoked = await cli(['tokens', 'revoke', id], ADMIN);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(new RegExp(`^revoked ${id} \\(ci runner\\) at \\d{4}-`));
    const refused = await cli(['sessions'], secret);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^forkline: UNAUTHENTICATED: /);
    expect(lines((await cli(['tokens', 'list'], ADMIN)).stdout)).toEqual([
      expect.stringMatching(new RegExp(`^${id}\\s+REVOKED\\s+read,write\\s+revoked \\d{4}-.*ci runner$`)),
    ]);
  });

  it('a wrong token: every command says UNAUTHENTICATED, those that open a WebSocket too (never "[object Object]")', async () => {
    const wrong = 'not-a-token-of-this-server-0123';
    const runs = await Promise.all([
      cli(['sessions'], wrong),
      cli(['send', 'ses_x', 'hi', '--wait'], wrong),
      cli(['events', 'ses_x', '--follow'], wrong),
      cli(['fork', 'ses_x', '--message', 'hi', '--wait'], wrong),
      cli(['export', 'ses_x'], wrong),
    ]);
    for (const r of runs) {
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^forkline: UNAUTHENTICATED: /);
      expect(r.stderr).not.toContain('[object Object]');
    }
  });

  it('refuses token management to a token without the admin scope, and bad arguments with usage', async () => {
    const writer = (await cli(['tokens', 'create', 'writer', '--scope', 'write'], ADMIN)).stdout.trim();
    const denied = await cli(['tokens', 'create', 'sneaky', '--scope', 'admin'], writer);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/^forkline: FORBIDDEN: creating API tokens needs an API token with the admin scope/);
    expect((await cli(['tokens', 'list'], writer)).stderr).toMatch(/^forkline: FORBIDDEN: listing API tokens needs/);

    const usage = [
      [['tokens', 'create', 'x', '--scope', 'root'], '--scope must be read, write or admin, got "root"'],
      [['tokens', 'create', 'x', '--expires', 'soon'], '--expires must be a duration'],
      [['tokens', 'rotate'], 'unknown tokens verb "rotate"'],
      [['tokens', 'revoke'], 'expected a token id'],
    ] as const;
    const runs = await Promise.all(usage.map(([args]) => cli([...args], ADMIN)));
    usage.forEach(([args, message], i) => {
      expect(runs[i].code, args.join(' ')).toBe(2);
      expect(runs[i].stderr).toContain(message);
    });
    const unknown = await cli(['tokens', 'revoke', 'tok_nope'], ADMIN);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^forkline: BAD_USER_INPUT: no API token tok_nope/);
  });
});
