// Summaries take agent slots (docs/agents.md "Compaction"): compactSession is
// a model call like a turn's, so a tenant's compactions hold at most its share
// of a process's slots and another tenant's turn is answered meanwhile. A
// local OpenAI-compatible server stands in for the provider: it answers turns
// at once and holds summary requests until the test lets them go, counting
// how many are in flight.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { waitFor } from '../helpers/wait.ts';
import { COMPACTION_HEADER } from '../../src/agent/compaction.ts';

const sse = (d: unknown) => `data: ${typeof d === 'string' ? d : JSON.stringify(d)}\n\n`;
function answer(res: http.ServerResponse, text: string) {
  const chunk = (delta: unknown, finish: string | null = null, usage?: unknown) =>
    sse({
      id: 'c1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'fake',
      choices: [{ index: 0, delta, finish_reason: finish }],
      ...(usage ? { usage } : {}),
    });
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(
    chunk({ role: 'assistant', content: '' }) +
      chunk({ content: text }) +
      chunk({}, 'stop', { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 }) +
      sse('[DONE]'),
  );
}

let provider: http.Server;
let app: TestApp;
let inFlight = 0;
let mostInFlight = 0;
let held: Array<() => void> = [];

beforeAll(async () => {
  provider = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (!body.includes(COMPACTION_HEADER)) return answer(res, 'fine');
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      held.push(() => {
        inFlight--;
        answer(res, 'the summary');
      });
    });
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const port = (provider.address() as AddressInfo).port;
  // Four slots, two tenants: each may hold two.
  app = await startTwoTenantApp({
    maxActiveSessions: 4,
    providers: { openaiCompatible: { baseUrl: `http://127.0.0.1:${port}/v1` } },
    defaultModel: { provider: 'openai-compatible', model: 'fake' },
  });
});
afterAll(async () => {
  for (const release of held) release();
  await app?.close();
  await new Promise((r) => provider.close(r));
});

const as = (who: Record<string, string>) => async (query: string, variables?: Record<string, unknown>) => {
  const r = await app.gql(query, variables, who);
  if (r.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(r.errors)}`);
  return r.data;
};
const asA = as(A);
const asB = as(B);

async function sessionWithATurn(call: typeof asA, title: string): Promise<string> {
  const { createSession } = await call('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title });
  await call('mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "hello" }) { inputId } }', { id: createSession.id });
  await waitFor(
    async () => {
      const s = (await call('query($id: ID!) { session(id: $id) { status turnCount } }', { id: createSession.id })).session;
      return s.status === 'IDLE' && s.turnCount === 1;
    },
    { what: `the first turn of ${title}` },
  );
  return createSession.id;
}

describe('compactSession takes an agent slot', () => {
  it("a tenant's compactions hold at most its share; another tenant's turn is answered meanwhile; the rest run as slots free", async () => {
    const ids = await Promise.all(Array.from({ length: 5 }, (_, i) => sessionWithATurn(asA, `A${i}`)));
    const compactions = ids.map((id) =>
      asA('mutation($id: ID!) { compactSession(input: { sessionId: $id }) { fromSeq toSeq summarySeq } }', { id }).then((r) => r.compactSession),
    );
    await waitFor(() => inFlight === 2, { what: 'two summary requests held' });
    // The other three reached the wait for a slot, and did not start.
    await waitFor(() => app.services.host.waitingForSlot === 3, { what: 'three compactions waiting for a slot' });
    expect(inFlight).toBe(2);

    // Tenant B's turn gets one of the two slots A cannot take.
    await sessionWithATurn(asB, 'B');
    expect(inFlight).toBe(2);

    // Released, the waiting compactions take the freed slots, two at a time at most.
    let finished = false;
    const done = Promise.all(compactions).finally(() => (finished = true));
    while (!finished) {
      const batch = held;
      held = [];
      for (const release of batch) release();
      await new Promise((r) => setTimeout(r, 50));
    }
    const results = await done;
    expect(results).toHaveLength(5);
    for (const r of results) expect(r.summarySeq).toBeGreaterThan(r.toSeq);
    expect(mostInFlight).toBe(2);
  });
});
