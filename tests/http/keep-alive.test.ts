// A request whose body came with its headers and was answered at once (no
// I/O: `{ __typename }`, a refusal) keeps its keep-alive connection, as one
// answered after a database read does: its body was read whole even though
// node had not yet parsed its end of message (http/body-deadlines.ts).
import http from 'node:http';
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

/** Posts each body in turn on one keep-alive agent: the sockets used and each answer's status and Connection header. */
async function postAll(bodies: string[]) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const target = new URL(app.url);
  const sockets = new Set<net.Socket>();
  const answers: Array<[number, string | undefined]> = [];
  try {
    for (const body of bodies) {
      await new Promise<void>((resolve, reject) => {
        const req = http.request(
          {
            host: target.hostname,
            port: target.port,
            path: target.pathname,
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
          },
          (res) => {
            answers.push([res.statusCode ?? 0, res.headers.connection]);
            res.resume().on('end', resolve);
          },
        );
        req.on('socket', (s) => sockets.add(s)).on('error', reject);
        req.end(body); // headers and body in one write: the body arrives with its headers
      });
    }
  } finally {
    agent.destroy();
  }
  return { sockets: sockets.size, answers };
}

describe('keep-alive', () => {
  it('keeps the connection of requests answered at once, and of those answered after a read', async () => {
    const bodies = [
      JSON.stringify({ query: '{ __typename }' }),
      JSON.stringify({ query: '{ __typename }' }),
      JSON.stringify({ query: '{ sessions(first: 1) { edges { node { id } } } }' }),
      JSON.stringify({ query: '{ nope }' }), // refused by validation, without I/O
      JSON.stringify({ query: '{ __typename }' }),
    ];
    const { sockets, answers } = await postAll(bodies);
    expect(answers).toEqual([
      [200, 'keep-alive'],
      [200, 'keep-alive'],
      [200, 'keep-alive'],
      [200, 'keep-alive'], // errors under application/json: 200
      [200, 'keep-alive'],
    ]);
    expect(sockets).toBe(1);
  });
});
