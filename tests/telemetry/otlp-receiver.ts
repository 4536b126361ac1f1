// A real OTLP/HTTP trace receiver for tests: decodes the exporter's JSON
// payloads (gzip or plain) with otlp-transformer's types.
import http from 'node:http';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import type { IExportTraceServiceRequest, ISpan } from '@opentelemetry/otlp-transformer/build/src/trace/internal-types';
import type { IAnyValue, IKeyValue } from '@opentelemetry/otlp-transformer/build/src/common/internal-types';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string; attributes: Record<string, unknown> }>;
  status: { code: number; message?: string };
  resource: Record<string, unknown>;
}

const hex = (id: string | Uint8Array | undefined) => (id === undefined ? undefined : typeof id === 'string' ? id : Buffer.from(id).toString('hex'));

function valueOf(v: IAnyValue): unknown {
  if (v.stringValue != null) return v.stringValue;
  if (v.boolValue != null) return v.boolValue;
  if (v.intValue != null) return Number(v.intValue);
  if (v.doubleValue != null) return v.doubleValue;
  if (v.arrayValue) return v.arrayValue.values.map(valueOf);
  if (v.kvlistValue) return attrs(v.kvlistValue.values);
  return undefined;
}
const attrs = (kvs: IKeyValue[] | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, valueOf(kv.value)]));

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  requests: number;
  contentTypes: string[];
  headers: http.IncomingHttpHeaders[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver: OtlpReceiver = { url: '', spans: [], requests: 0, contentTypes: [], headers: [], close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      receiver.requests++;
      receiver.contentTypes.push(String(req.headers['content-type']));
      receiver.headers.push(req.headers);
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
      if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      const request = JSON.parse(body.toString('utf8')) as IExportTraceServiceRequest;
      for (const rs of request.resourceSpans ?? []) {
        const resource = attrs(rs.resource?.attributes);
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans ?? ([] as ISpan[])) {
            receiver.spans.push({
              traceId: hex(s.traceId)!,
              spanId: hex(s.spanId)!,
              parentSpanId: hex(s.parentSpanId) || undefined,
              name: s.name,
              kind: s.kind,
              attributes: attrs(s.attributes),
              links: (s.links ?? []).map((l) => ({ traceId: hex(l.traceId)!, spanId: hex(l.spanId)!, attributes: attrs(l.attributes) })),
              status: { code: s.status?.code ?? 0, message: s.status?.message },
              resource,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  receiver.close = () => new Promise<void>((r) => server.close(() => r()));
  return receiver;
}
