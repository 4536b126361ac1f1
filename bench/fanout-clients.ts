// Child process of subscriptionFanout: the subscribers' WebSockets live in their
// own process, as real clients would, so the server's event loop only does the
// server's work. Reports over IPC, per seq, when each subscriber received it.
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

const [url, sessionId, count] = process.argv.slice(2);
const subscribers = Number(count);
const send = (msg: unknown) => process.send!(msg);
const arrivals = new Map<number, number[]>();
const clients: Client[] = [];
const now = () => performance.timeOrigin + performance.now();

for (let i = 0; i < subscribers; i++) {
  const client = createClient({ url, webSocketImpl: WebSocket, lazy: true, retryAttempts: 0 });
  clients.push(client);
  client.subscribe<{ sessionEvents: { seq: number } }>(
    { query: 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', variables: { id: sessionId } },
    {
      next: (r) => {
        if (!r.data) return;
        const at = now();
        const seq = r.data.sessionEvents.seq;
        const times = arrivals.get(seq) ?? [];
        times.push(at);
        arrivals.set(seq, times);
        if (times.length === subscribers) {
          arrivals.delete(seq);
          send({ seq, times });
        }
      },
      error: (e) => send({ error: String(e) }),
      complete: () => {},
    },
  );
}

process.on('message', async (msg: string) => {
  if (msg === 'close') {
    await Promise.all(clients.map((c) => c.dispose()));
    process.exit(0);
  }
});
