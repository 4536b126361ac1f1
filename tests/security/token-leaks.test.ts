// Where a token's bytes, or anything computed from them alone, may end up
// (docs/operations.md "API tokens"): an environment token is chosen by the
// operator and may be as short as 16 characters, so its unsalted digest (even a
// prefix of it) in a session's log is an offline guessing oracle for anyone who
// reads that log — a read-only token of the tenant, or whoever is handed an
// exported recording. A decision's `by` names the token without it.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

// A weak operator token: 16 characters from a guessable pattern.
const WEAK = 'alpha-admin-0042';
const OTHER = 'beta-token-0123456789abcdef0';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({
    approvalTools: ['note_write'],
    security: {
      rateLimit: false,
      apiTokens: new Map([
        [OTHER, 'beta'],
        [WEAK, 'alpha'],
      ]),
    },
  });
});
afterAll(() => app?.close());

describe("an environment token's digest", () => {
  it('is nowhere in the log a read token reads or in an exported recording; `by` still tells which token decided', async () => {
    const as = (token: string) => (query: string, variables?: Record<string, unknown>) => app.gql(query, variables, bearer(token));
    const admin = as(WEAK);
    const id = (await admin('mutation { createSession(input: { title: "approve me" }) { id } }')).data.createSession.id as string;
    await admin('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
      i: { sessionId: id, text: '!call note_write {"key": "k", "value": "v"}' },
    });
    await app.services.host.idle();
    const waiting = await admin('query($id: ID!) { session(id: $id) { pendingApprovals { callId } } }', { id });
    const approved = await admin('mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { id } }', {
      i: { sessionId: id, callId: waiting.data.session.pendingApprovals[0].callId },
    });
    expect(approved.errors).toBeUndefined();
    await app.services.host.idle();

    // The attacker: a read-only token of the tenant, and whoever is handed its export.
    const created = await admin('mutation($i: CreateApiTokenInput!) { createApiToken(input: $i) { secret } }', { i: { name: 'viewer', scopes: ['READ'] } });
    const reader = as(created.data.createApiToken.secret as string);
    const read = await reader('query($id: ID!) { session(id: $id) { recording events(first: 100) { edges { node { type data } } } } }', { id });
    expect(read.errors).toBeUndefined();
    const decision = read.data.session.events.edges.find((e: { node: { type: string } }) => e.node.type === 'tool/approval').node.data;
    const seen = JSON.stringify(read.data);

    // What the old `by` (env-token:<12 hex of its sha-256>) gave away: a guess checked offline in nanoseconds.
    const digest = sha256(WEAK);
    const guessed = Array.from({ length: 10_000 }, (_, n) => `alpha-admin-${String(n).padStart(4, '0')}`).find((g) => seen.includes(sha256(g).slice(0, 12)));
    expect(guessed).toBeUndefined();
    for (let at = 0; at + 8 <= digest.length; at++) expect(seen).not.toContain(digest.slice(at, at + 8));
    expect(seen).not.toContain(WEAK);
    // The decision still names an environment token, by its place in FORKLINE_API_TOKENS (the second).
    expect(decision.by).toBe('env-token:2');
  });
});
