// Child process of subscriptionFanout's throughput case: N sessionEvents
// subscribers on raw WebSockets speaking graphql-transport-ws by hand, which
// count frames and read each frame's seq without parsing the JSON — a client
// that costs little, so the figure is the server's. Reports over IPC.
import WebSocket from 'ws';

const [url, sessionId, count, sampleEvery] = process.argv.slice(2);
const n = Number(count);
const every = Number(sampleEvery);
const now = () => performance.timeOrigin + performance.now();
// BENCH_FANOUT_EXECUTE=1: a directive keeps the selection off the shared-payload path (http/graphql/event-projection.ts),
// so every event is executed and serialised per subscriber, as before it existed.
const QUERY = process.env.BENCH_FANOUT_EXECUTE
  ? 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq type data @include(if: true) } }'
  : 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq type data } }';

/** Highest seq each subscriber has received; arrival times of sampled seqs. */
const last = new Array<number>(n).fill(-1);
const samples = new Map<number, number[]>();
let waitingFor: number | undefined;
const sockets: WebSocket[] = [];

function seqOf(frame: Buffer): number {
  const at = frame.indexOf('"seq":');
  if (at < 0) return -1;
  let v = 0;
  for (let i = at + 6; i < frame.length; i++) {
    const d = frame[i] - 48;
    if (d < 0 || d > 9) break;
    v = v * 10 + d;
  }
  return v;
}

function check() {
  if (waitingFor === undefined) return;
  for (const s of last) if (s < waitingFor) return;
  process.send!({ reached: waitingFor, at: now() });
  waitingFor = undefined;
}

for (let i = 0; i < n; i++) {
  const ws = new WebSocket(url, 'graphql-transport-ws');
  sockets.push(ws);
  let acked = false;
  ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
  ws.on('message', (data: Buffer) => {
    if (!acked) {
      acked = true;
      ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: QUERY, variables: { id: sessionId } } }));
      return;
    }
    const seq = seqOf(data);
    if (seq < 0) return process.send!({ error: String(data).slice(0, 300) });
    if (seq !== last[i] + 1) process.send!({ error: `subscriber ${i}: seq ${seq} after ${last[i]}` });
    last[i] = seq;
    if (seq % every === 0) {
      const t = samples.get(seq) ?? [];
      t.push(now());
      samples.set(seq, t);
    }
    if (waitingFor !== undefined && seq >= waitingFor) check();
  });
  ws.on('error', (e) => process.send!({ error: String(e) }));
}

process.on('message', (msg: { cmd: string; seq?: number }) => {
  if (msg.cmd === 'wait') {
    waitingFor = msg.seq;
    check();
  } else if (msg.cmd === 'samples') {
    process.send!({ samples: [...samples] });
    samples.clear();
  } else if (msg.cmd === 'close') {
    for (const s of sockets) s.close();
    process.exit(0);
  }
});
