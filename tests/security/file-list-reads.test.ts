// What one GraphQL operation makes the service hold of Session.files
// (docs/operations.md "Memory and time"). A tree's listing is bounded by the
// quota (20,000 entries, each a path of up to 1,024 characters), and the cost
// limit prices it as one list: under 100 ids of `nodes`, aliases or a page of
// forks it was as many tree reads, side by side, each folding the change sets
// it inherits. The service runs as a child process under a heap cap, its
// resident memory sampled while each request runs.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { underWatch } from '../helpers/under-watch.ts';
import { fileCallEvents } from '../helpers/file-calls.ts';

const HEAP_CAP_MB = 256;
const GROWTH_BOUND_MB = 150;
/** Files of the tree: within the default quota's 20,000 entries, each named by 200 characters. */
const FILES = 19_000;

let service: ServiceProcess;
let sessionId: string;

beforeAll(async () => {
  service = await startService({
    env: { DATABASE_URL: await createTestDatabase(), FORKLINE_API_TOKENS: undefined, NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}` },
  });
  const content = Buffer.from('x');
  const hash = createHash('sha256').update(content).digest('hex');
  const changes = Array.from({ length: FILES }, (_, i) => ({ path: `${String(i).padStart(6, '0')}-${'n'.repeat(190)}.txt`, hash, size: 1 }));
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_tree', title: 'tree' } }];
  fileCallEvents(1, changes).forEach((e, seq) => lines.push({ seq, ...e }));
  lines.push({ blob: hash, base64: content.toString('base64') });
  const res = await fetch(service.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`,
  });
  const body = (await res.json()) as any;
  expect(res.status, JSON.stringify(body).slice(0, 500)).toBe(201);
  sessionId = body.session.id;
}, 300_000);

afterAll(async () => {
  await service?.stop();
});

describe('Session.files read many times in one operation', () => {
  it('one read lists the whole tree', async () => {
    const r = await postGraphQL(service.url, `query($id: ID!) { session(id: $id) { files { path } } }`, { id: sessionId });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.session.files).toHaveLength(FILES);
  });

  it('under 100 ids of nodes: refused before anything runs (before: 100 reads of the tree side by side)', async () => {
    const base = service.url.replace(/\/graphql$/, '');
    const run = await underWatch(service.child.pid!, base, () =>
      postGraphQL(service.url, `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Session { files { seq } } } }`, { ids: Array(100).fill(sessionId) }),
    );
    console.log(
      `nodes ×100 { files }: RSS growth ${run.growthMB.toFixed(0)} MB, slowest /healthz ${run.slowestHealthzMs.toFixed(0)} ms, status ${run.result.status}`,
    );
    expect(service.child.exitCode, service.output().slice(-2000)).toBeNull();
    expect(run.result.body.errors?.[0].message).toMatch(/^Session\.files may be read at most once per operation, and this one reads it up to 100 times/);
    expect(run.growthMB).toBeLessThan(GROWTH_BOUND_MB);
  });
});
