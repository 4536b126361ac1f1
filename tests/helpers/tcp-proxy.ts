// A TCP proxy in front of the test Postgres whose connections can go silent:
// nothing forwarded either way and nothing closed, as behind a NAT or firewall
// that dropped the flow, a network partition without RST, or a paused backend;
// or hold what a client sends, or what its server answers, until the test lets it through.
import net from 'node:net';

export interface TcpProxy {
  /** The proxy's address in `url` (a postgres URL whose host and port are replaced). */
  url: string;
  /** Connections made through it so far. */
  readonly connections: number;
  /** Every connection open now stops forwarding, without closing; later ones forward. */
  silenceOpen(): void;
  /** Every connection open now holds what it receives from its client until `resume` is called. */
  hold(): { resume: () => void; heldBytes: () => number };
  /** Every connection open now holds what its server answers until `resume` is called (what clients send goes through). */
  holdReplies(): { resume: () => void };
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  // The embedded server is reached through its socket directory when it has one (db/embedded.ts).
  const host = decodeURIComponent(target.hostname);
  const port = Number(target.port || 5432);
  const sockets = new Set<net.Socket>();
  const open: Array<[net.Socket, net.Socket]> = [];
  let connections = 0;
  const server = net.createServer((client) => {
    connections++;
    const upstream = host.startsWith('/') ? net.connect(`${host}/.s.PGSQL.${port}`) : net.connect(port, host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
    open.push([client, upstream]);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    get connections() {
      return connections;
    },
    silenceOpen() {
      for (const [client, upstream] of open.splice(0)) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    hold() {
      const held = open.map(([client]) => client);
      for (const [client, upstream] of open) {
        client.unpipe(upstream);
        client.pause();
      }
      return {
        heldBytes: () => held.reduce((n, c) => n + c.readableLength, 0),
        resume: () => {
          for (const [client, upstream] of open) client.pipe(upstream);
        },
      };
    },
    holdReplies() {
      const held = [...open];
      for (const [client, upstream] of held) {
        upstream.unpipe(client);
        upstream.pause();
      }
      return {
        resume: () => {
          for (const [client, upstream] of held) upstream.pipe(client);
        },
      };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
