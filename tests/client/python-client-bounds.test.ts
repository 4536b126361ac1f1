// What one answer may make the Python runner SDK's client hold, in bytes and
// time (docs/runners.md, "The Python SDK"): a proxy or a broken server in
// front of forkline answers with a body without end, a trickle, an SSE line
// or event without end, silence, or a body that is no GraphQL response.
// Each is a ForklineError the runner handles (retries, subscribes again), not
// a process that grows without bound, a call that never returns, or an
// exception of another kind escaping the client.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPython } from '../helpers/python-process.ts';

const MB = 1024 * 1024;

let server: http.Server;
let base: string;
const timers = new Set<NodeJS.Timeout>();

/** Writes `total` bytes of `byte` in 1 MB pieces, as the client reads them. */
function pour(res: http.ServerResponse, byte: string, total: number, then: () => void) {
  const piece = Buffer.alloc(MB, byte);
  let left = total;
  const next = () => {
    while (left > 0) {
      left -= MB;
      if (!res.write(piece)) return void res.once('drain', next);
    }
    then();
  };
  next();
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    res.on('error', () => undefined);
    const mode = new URL(req.url ?? '/', 'http://x').pathname.slice(1);
    if (mode === 'huge') {
      res.writeHead(200, { 'content-type': 'application/json' });
      pour(res, ' ', 100 * MB, () => res.end('{"data":{}}'));
    } else if (mode === 'trickle') {
      res.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => res.write(' '), 100);
      timers.add(timer);
      res.on('close', () => clearInterval(timer));
    } else if (mode === 'sse-line') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"data":{"x":"');
      pour(res, 'x', 100 * MB, () => res.end('"}}\n\n'));
    } else if (mode === 'sse-event') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      pour(res, 'x', 100 * MB, () => res.end('\n\n'));
    } else if (mode === 'sse-silent') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
    } else if (mode === 'not-utf8') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(Buffer.from('{"data":{"x":"\xff"}}', 'latin1'));
    } else if (mode === 'list') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
    } else if (mode === 'error-page') {
      res.writeHead(502, { 'content-type': 'text/html' });
      pour(res, '<', 100 * MB, () => res.end());
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const t of timers) clearInterval(t);
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** Runs `call` (a Python expression using `client`) and prints the ForklineError's code, or what else came of it. */
function python(mode: string, call: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const script = `
from forkline_runner.graphql import GraphQLClient, ForklineError
client = GraphQLClient(${JSON.stringify(`${base}/${mode}`)}, token="fkt_bounds", retry_for_s=0, timeout_s=2)
client.sse_idle_s = 2
client.max_response_bytes = 32 * 1024 * 1024
try:
    print("answered", str(${call})[:100])
except ForklineError as err:
    print(err.code)
except BaseException as err:
    print("escaped", type(err).__name__)
`;
  return runPython(script);
}
const request = 'client.request("{ x }")';
const subscribe = 'list(client.subscribe("subscription { x }"))';

describe("the Python runner SDK's client", () => {
  it.each([
    ['huge', request, 'RESPONSE_TOO_LARGE'], // 100 MB: over max_response_bytes (32 MiB here)
    ['trickle', request, 'NETWORK_ERROR'], // a byte every 100 ms: never whole within timeout_s
    ['error-page', request, 'HTTP_502'], // 100 MB of an error page: its first 64 KiB are read
    ['not-utf8', request, 'answered'], // read with U+FFFD for the bytes that are not UTF-8
    ['list', request, 'HTTP_200'],
    ['sse-line', subscribe, 'RESPONSE_TOO_LARGE'], // one line of 100 MB
    ['sse-event', subscribe, 'RESPONSE_TOO_LARGE'], // an event of 100 MB of lines
    ['sse-silent', subscribe, 'NETWORK_ERROR'], // nothing after the headers: lost after sse_idle_s
  ])('ends a %s answer within bounds: %s', async (mode, call, outcome) => {
    const run = await python(mode, call);
    expect(run.stderr).toBe('');
    expect(run.stdout.trim().split(' ')[0], run.stdout).toBe(outcome);
  });
});
