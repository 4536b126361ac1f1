// The dashboard's connection to /graphql on its own origin. With API tokens
// configured on the server, the token comes from `?token=` once (then kept in
// localStorage) or from the sidebar's token field.
import { print } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';

export interface Sink<T> {
  next(value: T): void;
  error?(err: unknown): void;
  complete?(): void;
}

const TOKEN_KEY = 'forkline.token';
const graphqlUrl = new URL('/graphql', location.href).toString();

function initialToken(): string | null {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl) {
    localStorage.setItem(TOKEN_KEY, fromUrl);
    url.searchParams.delete('token');
    history.replaceState(null, '', url); // keep the token out of the address bar and history
  }
  return localStorage.getItem(TOKEN_KEY);
}

let token = initialToken();
let ws: Client | undefined;
const socket = () =>
  (ws ??= createClient({
    url: graphqlUrl.replace(/^http/, 'ws'),
    lazy: true,
    retryAttempts: Infinity,
    connectionParams: () => (token ? { authorization: `Bearer ${token}` } : {}),
  }));

/** A GraphQL error with its `extensions.code` (UNAUTHENTICATED, SEQ_OUT_OF_RANGE, …). */
export class GraphQLRequestError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

async function request<R, V>(doc: TypedDocumentNode<R, V>, variables: V): Promise<R> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(graphqlUrl, { method: 'POST', headers, body: JSON.stringify({ query: print(doc), variables }) });
  const body = (await res.json().catch(() => ({}))) as {
    data?: R;
    errors?: Array<{ message: string; extensions?: { code?: string } }>;
  };
  if (body.errors?.length) {
    throw new GraphQLRequestError(body.errors.map((e) => e.message).join('; '), body.errors[0].extensions?.code);
  }
  if (!body.data) throw new GraphQLRequestError(`HTTP ${res.status}`);
  return body.data;
}

export const forkline = {
  query: request,
  mutate: request,
  subscribe<R, V>(doc: TypedDocumentNode<R, V>, variables: V, sink: Sink<R>): () => void {
    return socket().subscribe<R>(
      { query: print(doc), variables: variables as Record<string, unknown> },
      {
        next: (r) => {
          if (r.errors?.length) sink.error?.(new GraphQLRequestError(r.errors.map((e) => e.message).join('; ')));
          else if (r.data) sink.next(r.data as R);
        },
        error: (e) => sink.error?.(e),
        complete: () => sink.complete?.(),
      },
    );
  },
  hasToken: () => !!token,
  /** Stores the token and reloads, so every query and subscription uses it. */
  setToken(value: string) {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
    token = value || null;
    location.reload();
  },
};
