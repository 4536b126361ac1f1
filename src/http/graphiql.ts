// GraphiQL from the npm package @graphql-yoga/render-graphiql, served from
// this origin. Yoga's built-in page loads GraphiQL from a CDN: blank offline,
// and online it runs scripts without integrity checks on the origin where the
// dashboard keeps its token. Here the page is a small shell (no inline script)
// that loads the package's bundle, styles and Monaco workers from
// /graphiql/<version>/, under a CSP that allows nothing from elsewhere.
import { createRequire } from 'node:module';
import type http from 'node:http';
import type { GraphiQLOptions, Plugin } from 'graphql-yoga';
import { pageSecurityHeaders } from './page-security-headers.ts';

const PACKAGE = '@graphql-yoga/render-graphiql';
const VERSION: string = createRequire(import.meta.url)(`${PACKAGE}/package.json`).version;

/** Where GraphiQL's files are served; the version in the path lets browsers cache them for good. */
export const GRAPHIQL_ASSETS_PREFIX = '/graphiql/';
const BASE = `${GRAPHIQL_ASSETS_PREFIX}${VERSION}/`;

// Monaco injects <style> elements and GraphiQL sets style attributes at run
// time, so styles allow 'unsafe-inline' (styles cannot run code); scripts and
// workers come from this origin only.
const SECURITY_HEADERS = pageSecurityHeaders({
  'style-src': "'self' 'unsafe-inline'",
  'font-src': "'self' data:",
  'worker-src': "'self'",
});

/** Monaco's worker labels (what its getWorkerUrl is asked for) and the files serving them. */
const WORKERS = { editorWorkerService: 'editor.worker.js', json: 'json.worker.js', graphql: 'graphql.worker.js' };

// What yoga's inline page script did, as a file: workers from this origin, options from the page's JSON block.
const START_JS = `(() => {
  const workers = ${JSON.stringify(WORKERS)};
  const base = new URL('.', document.currentScript.src);
  self.MonacoEnvironment = {
    globalAPI: false,
    getWorkerUrl: (_moduleId, label) => new URL(workers[label] || workers.editorWorkerService, base).href,
  };
  const options = JSON.parse(document.getElementById('graphiql-options').textContent);
  YogaGraphiQL.renderYogaGraphiQL(document.getElementById('root'), options);
})();
`;

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** yoga's `renderGraphiQL`: the page shell. */
export function renderGraphiQLPage(options: GraphiQLOptions = {}): string {
  // `<` escaped so no option text can close the JSON block.
  const json = JSON.stringify(options).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(options.title || 'GraphiQL')}</title>
    <link rel="icon" href="${BASE}favicon.ico" />
    <link rel="stylesheet" href="${BASE}graphiql.css" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>You need to enable JavaScript to run GraphiQL.</noscript>
    <div id="root"></div>
    <script type="application/json" id="graphiql-options">${json}</script>
    <script src="${BASE}graphiql.js"></script>
    <script src="${BASE}start.js"></script>
  </body>
</html>
`;
}

/** Adds the security headers to yoga's GraphiQL page (the only HTML yoga answers with). */
export function useGraphiQLSecurityHeaders(): Plugin {
  return {
    onResponse({ response }) {
      if (response.headers.get('content-type')?.startsWith('text/html')) {
        for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.headers.set(name, value);
      }
    },
  };
}

interface Asset {
  type: string;
  body: Buffer;
}

let assets: Promise<Map<string, Asset>> | undefined;

/** The package's pieces as files; loaded on first use (the module is 9 MB of strings). */
function loadAssets(): Promise<Map<string, Asset>> {
  assets ??= import('@graphql-yoga/render-graphiql/graphiql').then((m) => {
    const js = 'text/javascript; charset=utf-8';
    const favicon = /^data:([^;,]+);base64,(.*)$/.exec(m.favicon);
    const files = new Map<string, Asset>([
      ['graphiql.js', { type: js, body: Buffer.from(m.js) }],
      ['graphiql.css', { type: 'text/css; charset=utf-8', body: Buffer.from(m.css) }],
      ['start.js', { type: js, body: Buffer.from(START_JS) }],
      [WORKERS.editorWorkerService, { type: js, body: Buffer.from(m.editorWorkerService) }],
      [WORKERS.json, { type: js, body: Buffer.from(m.jsonWorker) }],
      [WORKERS.graphql, { type: js, body: Buffer.from(m.graphqlWorker) }],
    ]);
    if (favicon) files.set('favicon.ico', { type: favicon[1], body: Buffer.from(favicon[2], 'base64') });
    return files;
  });
  return assets;
}

/** Serves GET/HEAD under GRAPHIQL_ASSETS_PREFIX; false (a 404 for the caller) for anything else. */
export async function serveGraphiQLAsset(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<boolean> {
  if ((req.method !== 'GET' && req.method !== 'HEAD') || !path.startsWith(BASE)) return false;
  const asset = (await loadAssets()).get(path.slice(BASE.length));
  if (!asset) return false;
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    'content-type': asset.type,
    'content-length': asset.body.length,
    'cache-control': 'public, max-age=31536000, immutable',
  });
  res.end(req.method === 'HEAD' ? undefined : asset.body);
  return true;
}
