// What one GraphQL operation makes the service build of Session.modelRequest
// (docs/operations.md "Memory and time"). A model request holds a session's
// history, up to MAX_HELD_HISTORY_CHARS (8 MiB) of it, and the query cost
// prices it like any object: a read token could ask for it under 100 ids of
// `nodes`, 30 aliases or a page of forks, and each was folded at once, side by
// side, whatever the query selected of it (`eventCount` alone makes a response
// of a few bytes, so the response limit never saw it). The service runs as a
// child process under a heap cap, its resident memory sampled while each
// request runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { okGraphQL, postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { underWatch } from '../helpers/under-watch.ts';
import { importRecording, writeHugeRecording } from '../helpers/huge-session.ts';
import { MAX_HELD_HISTORY_CHARS } from '../../src/core/held-text.ts';

/** The service's old-space limit (MB): past it the process dies, as a production one would past its memory. */
const HEAP_CAP_MB = 256;
/** RSS growth allowed to one request (MB): one history folded and the budget of what the operation keeps, not dozens. */
const GROWTH_BOUND_MB = 150;
const FORKS = 12;
/** The response limit (FORKLINE_MAX_RESPONSE_BYTES; default 128 MiB): five model requests of this session's 6 MB fit, twelve do not. */
const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

let service: ServiceProcess;
let base: string;
let sessionId: string;
let forkIds: string[];

const gql = (query: string, variables?: Record<string, unknown>) => okGraphQL(service.url, query, variables);

beforeAll(async () => {
  service = await startService({
    env: {
      DATABASE_URL: await createTestDatabase(),
      FORKLINE_API_TOKENS: undefined,
      FORKLINE_MAX_RESPONSE_BYTES: String(MAX_RESPONSE_BYTES),
      NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}`,
    },
  });
  base = service.url.replace(/\/graphql$/, '');
  // Twelve answers of a million characters (and a result and two inputs as long): a history the fold holds at its 8 MiB.
  const { file } = await writeHugeRecording(
    { turns: 12, hugeTurns: 12, hugeChars: 1_000_000, answerChars: 10, model: { provider: 'openai', model: 'gpt-4o', contextTokens: 128_000 } },
    'ses_modelrequests',
  );
  sessionId = await importRecording(base, file);
  forkIds = [];
  for (let i = 0; i < FORKS; i++)
    forkIds.push((await gql(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id: sessionId })).forkSession.session.id);
}, 300_000);

afterAll(async () => {
  await service?.stop();
});

/** Runs `query` while watching the service; it must still be alive afterwards. */
async function attack(what: string, query: string, variables: Record<string, unknown>) {
  const run = await underWatch(service.child.pid!, base, () => postGraphQL(service.url, query, variables));
  console.log(`${what}: RSS growth ${run.growthMB.toFixed(0)} MB, slowest /healthz ${run.slowestHealthzMs.toFixed(0)} ms, status ${run.result.status}`);
  expect(service.child.exitCode, service.output().slice(-2000)).toBeNull();
  expect(run.growthMB).toBeLessThan(GROWTH_BOUND_MB);
  return run.result.body;
}

describe('Session.modelRequest read many times in one operation', () => {
  it('one read answers the whole request, as a runner reads it', async () => {
    const d = await gql(`query($id: ID!) { session(id: $id) { modelRequest { eventCount messages } } }`, { id: sessionId });
    // The history as the fold holds it: millions of characters, cut to its bound.
    const chars = JSON.stringify(d.session.modelRequest.messages).length;
    expect(chars).toBeGreaterThan(5_000_000);
    expect(chars).toBeLessThan(MAX_HELD_HISTORY_CHARS * 1.1);
  });

  it('under 100 ids of nodes: one session is folded once, not 100 times side by side (before: the process died past its heap)', async () => {
    const body = await attack('nodes ×100', `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Session { modelRequest { eventCount } } } }`, {
      ids: Array(100).fill(sessionId),
    });
    expect(body.errors).toBeUndefined();
    expect(body.data.nodes).toHaveLength(100);
    for (const n of body.data.nodes) expect(n.modelRequest.eventCount).toBe(body.data.nodes[0].modelRequest.eventCount);
  });

  it(`under a page of ${FORKS} forks: past the response limit in all, the rest are refused as they come, naming it (before: each folded at once)`, async () => {
    const body = await attack(`${FORKS} forks`, `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Session { id modelRequest { eventCount } } } }`, {
      ids: forkIds,
    });
    const refused = (body.errors ?? []) as Array<{ message: string; path: Array<string | number>; extensions?: { code?: string } }>;
    // Five fit the limit (5 × 6 MB), the sixth passes it: it and those after it are refused, each at its own place.
    expect(refused.map((e) => e.path)).toEqual(forkIds.slice(5).map((_, i) => ['nodes', 5 + i, 'modelRequest']));
    expect(refused.every((e) => e.extensions?.code === 'RESPONSE_TOO_LARGE')).toBe(true);
    expect(refused[0].message).toMatch(
      /^Session\.modelRequest: the model requests this operation reads come to more than 33554432 bytes.*FORKLINE_MAX_RESPONSE_BYTES/,
    );
    expect(body.data.nodes.slice(0, 5).map((n: any) => n.modelRequest.eventCount)).toEqual(Array(5).fill(expect.any(Number)));
  });
});
