// Operations endpoints beside /graphql: /healthz (the process answers),
// /readyz (the database is reachable and every migration is applied) and
// /metrics (Prometheus text format). They carry no tenant data and need no token.
import type http from 'node:http';
import type { ServiceMetrics } from '../metrics.ts';

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, string>;
}

export interface ServiceEndpointOptions {
  readiness: () => Promise<ReadinessReport>;
  metrics?: ServiceMetrics;
}

function send(res: http.ServerResponse, status: number, contentType: string, body: string) {
  res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' }).end(body);
}

/** Returns true when it answered the request. */
export function serviceEndpoints(opts: ServiceEndpointOptions) {
  return async (req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<boolean> => {
    if (path !== '/healthz' && path !== '/readyz' && path !== '/metrics') return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed');
      return true;
    }
    if (path === '/healthz') {
      send(res, 200, 'application/json', JSON.stringify({ status: 'ok' }));
    } else if (path === '/readyz') {
      const report = await opts.readiness().catch((err: Error): ReadinessReport => ({ ready: false, checks: { readiness: err.message } }));
      send(res, report.ready ? 200 : 503, 'application/json', JSON.stringify({ status: report.ready ? 'ready' : 'not ready', ...report }));
    } else if (opts.metrics) {
      const { contentType, body } = await opts.metrics.render();
      send(res, 200, contentType, body);
    } else {
      return false;
    }
    return true;
  };
}
