// The Authorization field as hostile input (docs/operations.md "Tenants"):
// it is a singleton, and Node keeps the first of several and drops the rest,
// so a proxy adding its own after the client's would authenticate one caller
// while forkline served another. Several are refused (400) at every gated
// door before anything is read, the WebSocket upgrade included (the header is
// connection_init's fallback credential); one is served as before. Over
// graphql-ws, connectionParams.authorization wins over the header.
import net from 'node:net';
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { TOKEN_A, TOKEN_B, startTwoTenantApp } from '../helpers/two-tenants.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTwoTenantApp();
});
afterAll(() => app?.close());

/** A request written by hand (fetch would join repeated fields into one): its status line and body. */
function rawPost(door: string, contentType: string, body: string, authorizations: string[]): Promise<{ status: number; body: string }> {
  const url = new URL(app.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      const fields = [`Host: ${url.host}`, `content-type: ${contentType}`, `content-length: ${Buffer.byteLength(body)}`, 'connection: close'];
      socket.end(`POST ${door} HTTP/1.1\r\n${[...fields, ...authorizations.map((a) => `Authorization: ${a}`)].join('\r\n')}\r\n\r\n${body}`);
    });
    let out = '';
    socket.on('data', (d) => (out += d));
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(out.split(' ')[1]), body: out.slice(out.indexOf('\r\n\r\n') + 4) }));
  });
}

const QUERY = JSON.stringify({ query: '{ __typename }' });
const RECORDING = `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_auth', title: 'auth' } })}\n`;

describe('several Authorization fields', () => {
  it.each([
    ['/graphql', 'application/json', QUERY],
    ['/recordings', 'application/x-ndjson', RECORDING],
    ['/agui', 'application/json', '{}'],
  ])('are refused at %s with 400, whichever comes first; one is served', async (door, type, body) => {
    for (const pair of [
      [`Bearer ${TOKEN_A}`, `Bearer ${TOKEN_B}`],
      [`Bearer ${TOKEN_A}`, 'Bearer not-a-token-of-anyone-at-all'],
    ]) {
      const r = await rawPost(door, type, body, pair);
      expect(r.status).toBe(400);
      expect(r.body).toContain('send one Authorization header, not several');
    }
    expect((await rawPost('/graphql', 'application/json', QUERY, [`Bearer ${TOKEN_A}`])).status).toBe(200);
  });
});

/** A WebSocket upgrade to /graphql written by hand with `authorizations`: the server's status line and body. */
function rawUpgrade(authorizations: string[]): Promise<{ status: number; text: string }> {
  const url = new URL(app.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      const fields = [
        `Host: ${url.host}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
        'Sec-WebSocket-Version: 13',
        'Sec-WebSocket-Protocol: graphql-transport-ws',
        ...authorizations.map((a) => `Authorization: ${a}`),
      ];
      socket.write(`GET /graphql HTTP/1.1\r\n${fields.join('\r\n')}\r\n\r\n`);
    });
    let out = '';
    socket.on('data', (d) => {
      out += d;
      if (out.startsWith('HTTP/1.1 101')) socket.destroy(); // upgraded: nothing more to read
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(out.split(' ')[1]), text: out }));
  });
}

/** A graphql-ws client whose upgrade carries `header` as Authorization and whose connection_init carries `params`. */
function wsClient(header: string | undefined, params: Record<string, string>) {
  const Impl = class extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { headers: header ? { authorization: header } : {} });
    }
  };
  return createClient({ url: app.url.replace(/^http/, 'ws'), webSocketImpl: Impl, retryAttempts: 0, connectionParams: params });
}

/** One query over `client`: its data, or the error (a close event or GraphQL errors) it ended with. */
function wsQuery(client: ReturnType<typeof createClient>, query: string, variables: Record<string, unknown>): Promise<any> {
  return new Promise((resolve) => {
    let result: unknown;
    client.subscribe({ query, variables }, { next: (r) => (result = r), error: (e) => resolve({ error: e }), complete: () => resolve(result) });
  });
}

describe('the WebSocket upgrade', () => {
  it('is refused with 400 for several Authorization fields; one is upgraded', async () => {
    const several = await rawUpgrade([`Bearer ${TOKEN_A}`, `Bearer ${TOKEN_B}`]);
    expect(several.status).toBe(400);
    expect(several.text).toContain('send one Authorization header, not several');
    expect((await rawUpgrade([`Bearer ${TOKEN_A}`])).status).toBe(101);
  });

  it("connectionParams' token wins over the upgrade's header; the header serves when there is none", async () => {
    const created = await app.gql('mutation { createSession(input: { title: "alpha" }) { id } }', {}, { authorization: `Bearer ${TOKEN_A}` });
    const id = created.data.createSession.id as string;
    const read = 'query($id: ID!) { session(id: $id) { id } }';
    const alphaByParams = wsClient(`Bearer ${TOKEN_B}`, { authorization: `Bearer ${TOKEN_A}` });
    const betaByParams = wsClient(`Bearer ${TOKEN_A}`, { authorization: `Bearer ${TOKEN_B}` });
    const alphaByHeader = wsClient(`Bearer ${TOKEN_A}`, {});
    try {
      expect((await wsQuery(alphaByParams, read, { id })).data.session).toEqual({ id });
      const beta = await wsQuery(betaByParams, read, { id });
      // Served as beta, whose tenant has no such session (not a refused or failed socket).
      expect(beta.error).toBeUndefined();
      expect(beta.errors?.[0]?.extensions?.code ?? beta.data.session).toSatisfy((v: unknown) => v === null || v === 'SESSION_NOT_FOUND');
      expect((await wsQuery(alphaByHeader, read, { id })).data.session).toEqual({ id });
    } finally {
      await Promise.all([alphaByParams.dispose(), betaByParams.dispose(), alphaByHeader.dispose()]);
    }
  });
});
