// An operation that fails inside the server's pipeline (not a resolver's error,
// which GraphQL reports in the result) makes graphql-ws close its socket with
// 4500. graphql-ws words that close from the error's message unless NODE_ENV
// is production, and such a message may carry internals (a statement, a path,
// a token) to the client. `npm start` leaves NODE_ENV as the operator set it
// (unset, as a rule) and vitest sets `test`: the door pins the generic reason
// (http/graphql/graphql-handler.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Plugin } from 'graphql-yoga';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const SECRET = 'SELECT "token" FROM "ApiToken" WHERE hash = $1';
// A failure in the execution pipeline itself, as a broken plugin or a thrown bug would make it.
const broken: Plugin = {
  onExecute() {
    throw new Error(`internal: ${SECRET}`);
  },
};

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ yogaPlugins: [broken] });
});
afterAll(async () => {
  await app?.close();
});

describe('an internal failure over graphql-ws', () => {
  it('closes the socket with 4500 and a generic reason, never the error message, whatever NODE_ENV says', async () => {
    expect(process.env.NODE_ENV).not.toBe('production'); // graphql-ws would pick the generic reason by itself
    const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'connection_init' }));
    await new Promise((r) => ws.once('message', r)); // connection_ack
    const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
    ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: '{ __typename }' } }));
    const { code, reason } = await closed;
    expect(code).toBe(4500);
    expect(reason).toBe('Internal server error');
    expect(reason).not.toContain('ApiToken');
  });
});
