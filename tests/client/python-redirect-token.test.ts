// The Python runner SDK's token and a redirect (docs/operations.md "API
// tokens"): urllib follows a 301/302/303 of a POST as a GET and sends the
// request's headers along — its Authorization too, to whatever origin the
// Location names (a proxy's sign-in page, an attacker who controls one hop).
// fetch (the TypeScript client) drops Authorization on a cross-origin redirect;
// the Python client follows no redirect at all: a GraphQL POST is never
// answered with one by forkline, so one is an error to report, not a path.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForklineClient } from '@forkline/client';
import { runPython } from '../helpers/python-process.ts';

const TOKEN = 'fkt_redirected-token-0123456789abcdefghijklmnopq';

const servers: http.Server[] = [];
async function listen(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Authorization headers the other origin received. */
const received: Array<string | undefined> = [];
let redirector: string;
beforeAll(async () => {
  const elsewhere = await listen((req, res) => {
    received.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":{"__typename":"Query"}}');
  });
  redirector = await listen((req, res) => {
    req.resume();
    // The status from ?code= or from the path's first segment (/302/sessions/…: the client builds that URL itself).
    const url = new URL(req.url ?? '/', 'http://x');
    const code = Number(url.searchParams.get('code') ?? url.pathname.split('/')[1]);
    res.writeHead(code, { location: `${elsewhere}/graphql` }).end();
  });
});
afterAll(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

const python = runPython;

describe("the Python runner's token on a redirect", () => {
  it('is never sent to the origin a 301, 302, 303, 307 or 308 names: a request or subscription fails with the status', async () => {
    for (const code of [301, 302, 303, 307, 308]) {
      const run = await python(`
import json
from forkline_runner.graphql import GraphQLClient, ForklineError
try:
    GraphQLClient(${JSON.stringify(`${redirector}/graphql?code=${code}`)}, token=${JSON.stringify(TOKEN)}).request("{ __typename }")
    print("followed")
except ForklineError as err:
    print(err.code)
try:
    list(GraphQLClient(${JSON.stringify(`${redirector}/graphql?code=${code}`)}, token=${JSON.stringify(TOKEN)}).subscribe("subscription { sessionsChanged { id } }"))
    print("followed")
except ForklineError as err:
    print(err.code)
`);
      expect(received, String(code)).toEqual([]);
      expect(run.stderr, String(code)).toBe('');
      expect(run.stdout.trim().split('\n'), String(code)).toEqual([`HTTP_${code}`, `HTTP_${code}`]);
    }
  });

  it("is dropped by the TypeScript client's fetch when a redirect leaves the origin (it still follows GETs)", async () => {
    received.length = 0;
    for (const code of [301, 302, 303, 307, 308]) {
      const client = createForklineClient({ url: `${redirector}/${code}/graphql`, token: TOKEN });
      await client.eventPage('ses_1').catch(() => undefined);
    }
    expect(received).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });
});
