// POST /graphql for queries and mutations without yoga's fetch-API layer.
//
// yoga turns every node:http request into a fetch Request (headers, a body
// stream) and every result into a Response, and runs its request pipeline
// around them; on the hot reads that layer and the garbage it leaves were a
// large share of the server's CPU (npm run bench, readThroughput). The fast lane
// runs the same envelop pipeline yoga runs (parse and validation caches, query
// limits, masking, metrics, the JIT) straight from the node request, and
// answers with yoga's own result processor (processRegularResult: same status
// codes, headers and body). It serves only what it is sure to answer exactly as
// yoga would: a JSON POST, JSON accepted, a well-formed request body, a valid
// query or mutation. Everything else — and every refusal yoga words itself
// (syntax and validation errors, CORS) — goes to yoga with the body already read.
//
// What it skips are yoga's request-level hooks (REQUEST_HOOKS, and yoga's
// request instrumentation): a plugin that needs them would silently miss most
// traffic. So the fast lane is fenced: it refuses to start while yoga runs a
// plugin with such a hook — registered, or added by a registered one when yoga
// starts — that is not on its allow-list (each entry says why it may miss
// these requests).
import type http from 'node:http';
import { getOperationAST, parse, type DocumentNode, type ExecutionResult } from 'graphql';
import { processRegularResult, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { Context } from '../../graphql/context.ts';
import type { Guard } from '../guard.ts';
import { perHeaderValue } from '../per-header-value.ts';
import { bodyTextOf } from '../http-body.ts';
import { parsesPerDocument } from '../../graphql/plugins/per-document.ts';
import { MAX_REMEMBERED_DOCUMENTS, isRememberable } from './remembered-documents.ts';

/** yoga's hooks around a request (not envelop's around an operation): the fast lane never runs them. */
export const REQUEST_HOOKS = ['onRequest', 'onRequestParse', 'onParams', 'onExecutionResult', 'onResultProcess', 'onResponse'] as const;
/** yoga's instrumentation of a request (envelop's parse, validate, execute… run on the fast lane too). */
export const REQUEST_INSTRUMENTATION = ['request', 'requestParse', 'operation', 'resultProcess'] as const;

/** The request-level hooks a plugin has, named as they would be missed. */
function requestHooksOf(plugin: Plugin): string[] {
  const p = plugin as Record<string, unknown>;
  const instrumentation = (p.instrumentation ?? {}) as Record<string, unknown>;
  return [
    ...REQUEST_HOOKS.filter((h) => typeof p[h] === 'function'),
    ...REQUEST_INSTRUMENTATION.filter((h) => typeof instrumentation[h] === 'function').map((h) => `instrumentation.${h}`),
  ];
}

/** Throws when a plugin with a request-level hook is not on the allow-list. */
export function assertFastLaneSafe(plugins: readonly Plugin[], allowed: readonly Plugin[]): void {
  const ok = new Set(allowed);
  for (const plugin of plugins) {
    if (ok.has(plugin)) continue;
    const hooks = requestHooksOf(plugin);
    if (hooks.length) {
      throw new Error(
        `the HTTP fast lane (http/graphql/fast-lane.ts) would skip a yoga plugin's request-level hooks (${hooks.join(', ')}): ` +
          "add the plugin to the fast lane's allow-list if it need not see those requests (http/graphql/graphql-handler.ts), or turn the fast lane off (FORKLINE_HTTP_FAST_LANE=false)",
      );
    }
  }
}

/**
 * Posts around the plugins registered with yoga (`fence.around(plugins)`). A
 * plugin may add others when yoga starts (onPluginInit's addPlugin, spliced
 * in right after it), which the registered list does not show. envelop calls
 * each plugin's onPluginInit in order with the list being resolved: by the
 * time it reaches the end post, every plugin before it has added its own, so
 * between the posts are the registered plugins and every one they added, and
 * nothing of yoga's own.
 */
export function fastLaneFence() {
  let resolved: readonly Plugin[] | undefined;
  const start: Plugin = {};
  const end: Plugin = { onPluginInit: ({ plugins }) => void (resolved = [...plugins] as Plugin[]) };
  return {
    around: (plugins: readonly Plugin[]): Plugin[] => [start, ...plugins, end],
    /** What yoga runs between the posts; throws before yoga has started. */
    plugins(): Plugin[] {
      const from = resolved?.indexOf(start) ?? -1;
      const to = resolved?.indexOf(end) ?? -1;
      if (!resolved || from < 0 || to < from) throw new Error('the fast lane starts after yoga, with its fence around the registered plugins');
      return resolved.slice(from + 1, to);
    },
  };
}
export type FastLaneFence = ReturnType<typeof fastLaneFence>;

type RegularType = 'application/json' | 'application/graphql-response+json';
const REGULAR_TYPES: RegularType[] = ['application/graphql-response+json', 'application/json'];
const PARAMS = new Set(['query', 'variables', 'operationName', 'extensions']);
/** Accept (and Content-Type) header values remembered, each kind. */
const MAX_REMEMBERED_ACCEPTS = 1000;

/**
 * The media type yoga's result processors pick for a non-streamed result, or
 * null when it would pick another processor (SSE, multipart) or none (406).
 * Mirrors yoga's accept.js and use-result-processor.js: utf-8 types only, the
 * last match in reversed order wins, the header's wildcards match.
 */
export const regularMediaType = perHeaderValue(mediaTypeOf, MAX_REMEMBERED_ACCEPTS);

/** A JSON request body's Content-Type (`application/json`, optionally `;charset=utf-8`, any case and spacing). */
const isJsonType = perHeaderValue((type: string | undefined): boolean => {
  const normal = type?.toLowerCase().replace(/\s/g, '');
  return normal === 'application/json' || normal === 'application/json;charset=utf-8';
}, MAX_REMEMBERED_ACCEPTS);

function mediaTypeOf(accept: string | undefined): RegularType | null {
  const asked = (accept || '*/*')
    .replace(/\s/g, '')
    .toLowerCase()
    .split(',')
    .flatMap((a) => {
      const [type, ...params] = a.split(';');
      const charset = params.find((p) => p.includes('charset=')) ?? 'charset=utf-8';
      return charset === 'charset=utf-8' ? [type] : [];
    })
    .reverse();
  let chosen: RegularType | null = null;
  for (const type of asked) {
    const [pre, suf] = type.split('/');
    for (const ours of REGULAR_TYPES) {
      const [p, s] = ours.split('/');
      if ((pre === '*' || pre === p) && (suf === '*' || suf === s)) chosen = ours;
    }
  }
  return chosen;
}

interface Params {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

/** A request body yoga would accept as it is; anything else is yoga's to answer. */
function paramsOf(body: string): Params | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const p = parsed as Record<string, unknown>;
  for (const key of Object.keys(p)) if (!PARAMS.has(key)) return null;
  if (typeof p.query !== 'string') return null;
  if (p.variables != null && (typeof p.variables !== 'object' || Array.isArray(p.variables))) return null;
  if (p.operationName != null && typeof p.operationName !== 'string') return null;
  if (p.extensions != null) return null; // persisted-query and other protocol extensions: yoga's business
  return p as unknown as Params;
}

/**
 * The `request` yoga puts in a plugin's context, as far as plugins read it:
 * method, URL and headers (a fetch Headers, built only when read — most
 * requests never read it, and building one per request is what the fast lane saves).
 * A class, not an object literal with getters: V8 allocates a literal's
 * accessors in the old generation, so their closures kept every request (its
 * socket, body and context) past the young-generation GCs until the next full one.
 */
class NodeRequest implements Pick<Request, 'method' | 'url' | 'headers'> {
  private built?: Headers;
  constructor(
    private readonly req: http.IncomingMessage,
    private readonly fetchAPI: YogaServerInstance<object, object>['fetchAPI'],
  ) {}
  get method(): string {
    return this.req.method ?? 'POST';
  }
  get url(): string {
    return `http://${this.req.headers.host ?? 'localhost'}${this.req.url ?? '/'}`;
  }
  get headers(): Headers {
    return (this.built ??= new this.fetchAPI.Headers(
      Object.entries(this.req.headers).flatMap(([name, value]): Array<[string, string]> =>
        value === undefined ? [] : Array.isArray(value) ? value.map((v): [string, string] => [name, v]) : [[name, value]],
      ),
    ));
  }
}

export function requestOf(req: http.IncomingMessage, fetchAPI: YogaServerInstance<object, object>['fetchAPI']): Pick<Request, 'method' | 'url' | 'headers'> {
  return new NodeRequest(req, fetchAPI);
}

/** A query or mutation, picked by `operationName` (subscriptions, and documents yoga cannot pick one from, are yoga's). */
function isQueryOrMutation(document: DocumentNode, operationName: string | null | undefined): boolean {
  const operation = getOperationAST(document, operationName)?.operation;
  return operation === 'query' || operation === 'mutation';
}

export interface FastLaneOptions {
  yoga: YogaServerInstance<{ req?: http.IncomingMessage }, Context>;
  guard: Guard;
  /** Around the plugins registered with yoga; those allowed to miss the fast lane's requests. */
  fence: FastLaneFence;
  allowed: readonly Plugin[];
  /** With CORS origins configured, cross-origin requests need yoga's CORS headers. */
  corsEnabled: boolean;
  /** The parser's token limit (query limits, plugins/limits.ts). */
  maxTokens: number;
  onErrors?: (errors: ExecutionResult['errors']) => void;
}

/**
 * Serves the request if it can; returns false when yoga must. Call after
 * the guard's withinBodyLimit, which read the body. Throws when a plugin
 * yoga runs — registered, or added by one at start — has request-level hooks
 * and is not on the allow-list (assertFastLaneSafe).
 */
export function fastLane(opts: FastLaneOptions) {
  assertFastLaneSafe(opts.fence.plugins(), opts.allowed);
  const { yoga, guard } = opts;
  // Read once: yoga is a Proxy whose every property read goes through its trap, and a method read (getEnveloped)
  // comes back as a new wrapper function each time (@whatwg-node/server's createServerAdapter).
  const getEnveloped = yoga.getEnveloped;
  const fetchAPI = yoga.fetchAPI;
  // A query text that parsed and validated cleanly once does again, as long as
  // every parse and validation hook between the fence posts answers by the
  // document alone (graphql/plugins/per-document.ts). yoga's own such hooks
  // do for a POST: its parse and validation caches, and the rest act on GET
  // requests or on errors only. So the document is kept, and the hooks, whose
  // cached answers still cost a walk of every plugin per request, are skipped.
  const remembersDocuments = opts.fence.plugins().every(parsesPerDocument);
  const accepted = new Map<string, DocumentNode>();
  const parsed = new Set<string>();
  const parsesCleanly = (query: string) => {
    if (parsed.has(query)) return true;
    try {
      parse(query, { maxTokens: opts.maxTokens, noLocation: true });
    } catch {
      return false;
    }
    // Only short texts are kept (remembered-documents.ts): 1,000 texts of the body limit would be 17 GB.
    if (!isRememberable(query)) return true;
    if (parsed.size >= MAX_REMEMBERED_DOCUMENTS) parsed.clear();
    parsed.add(query);
    return true;
  };
  /** The document of a query text the fast lane may run (parsed and validated by yoga's hooks), or undefined: yoga's to answer. */
  const admitted = (enveloped: ReturnType<typeof getEnveloped>, params: Params): DocumentNode | undefined => {
    // A query that does not parse is yoga's: its parse hooks word the error, and
    // its parse cache keeps the worded error. So a text is tried here first.
    if (!parsesCleanly(params.query)) return undefined;
    // Parse hooks may refuse a document too (yoga's own, seeing the request: an operation it cannot pick): yoga's to word.
    let document: DocumentNode;
    try {
      document = enveloped.parse(params.query);
    } catch {
      return undefined;
    }
    if (!isQueryOrMutation(document, params.operationName)) return undefined;
    // Invalid documents are yoga's too (some limit rules throw rather than report).
    try {
      if (enveloped.validate(enveloped.schema, document).length) return undefined;
    } catch {
      return undefined;
    }
    // Only short texts are kept (the reads a client repeats): a text with a long literal is not held here, nor its document.
    if (remembersDocuments && isRememberable(params.query)) {
      if (accepted.size >= MAX_REMEMBERED_DOCUMENTS) accepted.clear();
      accepted.set(params.query, document);
    }
    return document;
  };
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean> => {
    if (req.method !== 'POST' || req.headers['content-length'] === undefined) return false;
    if (!isJsonType(req.headers['content-type'])) return false;
    if (opts.corsEnabled && req.headers.origin !== undefined) return false;
    const mediaType = regularMediaType(req.headers.accept);
    if (!mediaType) return false;
    const { refused, principal } = guard.check(req);
    if (refused || !principal) return false; // yoga words the refusal (the gate's decision is kept)

    const body = bodyTextOf(req); // read (strict UTF-8) by withinBodyLimit; yoga has its bytes
    if (body === undefined) return false;
    const params = paramsOf(body);
    if (!params) return false;

    const enveloped = getEnveloped({ req, res, params, request: requestOf(req, fetchAPI) });
    const document = accepted.get(params.query) ?? admitted(enveloped, params);
    if (!document || !isQueryOrMutation(document, params.operationName)) return false;

    // From here on the operation runs: a mutation must not run twice, so the fast lane answers whatever happens.
    const result = (await enveloped.execute({
      schema: enveloped.schema,
      document,
      variableValues: params.variables ?? undefined,
      operationName: params.operationName ?? undefined,
      contextValue: await enveloped.contextFactory(),
    })) as ExecutionResult;
    if (result.errors?.length) opts.onErrors?.(result.errors);
    if (!result.errors && !result.extensions) {
      // What processRegularResult answers for a result without errors (status 200, its content type, the result's
      // stringify), without building a fetch Response to read back.
      const text = (result as { stringify?: (r: unknown) => string }).stringify?.(result) ?? JSON.stringify(result);
      res.writeHead(200, { 'content-type': `${mediaType}; charset=utf-8`, 'content-length': String(Buffer.byteLength(text)) }).end(text);
      return true;
    }
    const response = processRegularResult(result, fetchAPI, mediaType);
    const text = await response.text();
    const headers: Record<string, string> = {};
    response.headers.forEach((value, key) => (headers[key] = value));
    headers['content-length'] = String(Buffer.byteLength(text));
    res.writeHead(response.status, headers).end(text);
    return true;
  };
}
