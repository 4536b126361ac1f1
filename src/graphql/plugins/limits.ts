// Query shape limits through GraphQL Armor: tokens (at parse time: a document
// nested a few thousand levels deep would overflow graphql-js's recursive
// parser), then depth, aliases and cost (which multiplies by literal
// `first`/`last`) as validation rules. Page sizes themselves
// are capped at MAX_PAGE_SIZE by the connections (builder.ts, input.ts), and
// the request body by yoga's maxRequestBodySize (server.ts).
import type { Plugin } from 'graphql-yoga';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { costLimitPlugin } from '@escape.tech/graphql-armor-cost-limit';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';

export interface QueryLimits {
  maxTokens: number;
  maxDepth: number;
  maxAliases: number;
  maxCost: number;
}

export function useQueryLimits(limits: QueryLimits): Plugin {
  return {
    onPluginInit({ addPlugin }) {
      addPlugin(maxTokensPlugin({ n: limits.maxTokens }));
      // Introspection (GraphiQL) is exempt from depth and cost; it is bounded by the schema.
      addPlugin(maxDepthPlugin({ n: limits.maxDepth, ignoreIntrospection: true }));
      addPlugin(maxAliasesPlugin({ n: limits.maxAliases }));
      addPlugin(costLimitPlugin({ maxCost: limits.maxCost, ignoreIntrospection: true }));
    },
  };
}
