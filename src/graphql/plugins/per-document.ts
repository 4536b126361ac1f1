// Plugins whose parse and validation hooks answer by the document alone, not
// by the request (query limits, error codes): a document they passed once
// passes them again. The HTTP fast lane skips parse and validation for a query
// text it has seen pass them, and only while every such hook is marked so
// (http/graphql/fast-lane.ts).
import type { Plugin } from 'graphql-yoga';

const marked = new WeakSet<Plugin>();

/** Marks a plugin whose onParse and onValidate hooks depend on the document only. */
export function perDocument<P extends Plugin>(plugin: P): P {
  marked.add(plugin);
  return plugin;
}

/**
 * True when a plugin has no parse or validation hook, or only ones marked per
 * document. onEnveloped counts as one: it may set the schema documents are
 * validated against, per request.
 */
export const parsesPerDocument = (plugin: Plugin): boolean => (!plugin.onParse && !plugin.onValidate && !plugin.onEnveloped) || marked.has(plugin);
