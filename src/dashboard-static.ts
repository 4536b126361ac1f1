// Serves the built dashboard (client/dashboard/dist, made by `npm run build`)
// for the server's non-GraphQL paths: files by extension, and index.html for
// client-side routes such as /sessions/<id>.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type http from 'node:http';
import { pageSecurityHeaders } from './http/page-security-headers.ts';

export const DASHBOARD_DIST = fileURLToPath(new URL('../client/dashboard/dist/', import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

// Same-origin only; the dashboard talks to /graphql over fetch and WebSocket.
const SECURITY_HEADERS = pageSecurityHeaders({ 'img-src': "'self' data: blob:" });

/** Read errors that mean the path names no file (a directory, a file used as a directory, a name too long). */
const NOT_A_FILE = new Set(['ENOENT', 'EISDIR', 'ENOTDIR', 'ENAMETOOLONG']);

export type OtherRequestHandler = (req: http.IncomingMessage, res: http.ServerResponse) => Promise<boolean>;

/** A handler for the router's `onOtherRequest` (http/http-server.ts): true when it answered. */
export function serveDashboard(distDir: string = DASHBOARD_DIST): OtherRequestHandler {
  const root = path.resolve(distDir);
  return async (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    let pathname: string;
    let carriesToken: boolean;
    try {
      const url = new URL(req.url ?? '/', 'http://dashboard');
      carriesToken = url.searchParams.has('token');
      pathname = decodeURIComponent(url.pathname);
    } catch {
      return false; // not percent-decodable: no such file
    }
    // No file has a NUL or a control character in its name (fs would throw on NUL).
    // eslint-disable-next-line no-control-regex -- control characters are what it refuses
    if (/[\u0000-\u001f]/.test(pathname)) return false;
    const file = path.resolve(root, `.${pathname}`);
    if (file !== root && !file.startsWith(root + path.sep)) return false;
    const ext = path.extname(file);
    // A path with an extension is an asset: it exists or it is a 404. Anything
    // else is a client-side route and gets the app shell.
    const target = ext ? file : path.join(root, 'index.html');
    let body: Buffer;
    try {
      body = await fs.readFile(target);
    } catch (err) {
      if (!NOT_A_FILE.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      if (ext) return false;
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end('The dashboard is not built: run `npm run build` (npm start does it).\n');
      return true;
    }
    const hashedAsset = pathname.startsWith('/assets/');
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': CONTENT_TYPES[path.extname(target)] ?? 'application/octet-stream',
      'content-length': body.length,
      // A `?token=` link (client/dashboard/src/api.ts) puts the token in the URL: no cache may keep an entry under it.
      'cache-control': carriesToken ? 'no-store' : hashedAsset ? 'public, max-age=31536000, immutable' : 'no-cache',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  };
}
