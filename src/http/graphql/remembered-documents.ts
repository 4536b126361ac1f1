// Query texts the server remembers between requests (yoga's parse cache, its
// cache of parse errors, the HTTP fast lane's): by text, so each kept text is
// held whole as long as it is kept. A text may be the body limit (17 MiB) over
// HTTP and a message (1 MiB) over graphql-ws, and a client repeating the reads
// it needs sends short ones: only texts up to MAX_REMEMBERED_DOCUMENT_CHARS
// are kept, so what all of them hold is bounded (docs/operations.md "Memory
// and time"). A longer text is parsed and checked again each time it comes.
import type { DocumentNode } from 'graphql';
import { LRUCache } from 'lru-cache';

/** How many query texts each memory keeps. */
export const MAX_REMEMBERED_DOCUMENTS = 1000;
/** Query texts longer than this are never kept: parsed (and validated) every time they are sent. */
export const MAX_REMEMBERED_DOCUMENT_CHARS = 16 * 1024;
/** yoga's own default: an hour. */
const REMEMBERED_MS = 3_600_000;

export const isRememberable = (query: string) => query.length <= MAX_REMEMBERED_DOCUMENT_CHARS;

/** A memory by query text that keeps only rememberable texts (lru-cache refuses an entry over maxEntrySize). */
const byText = <V extends object>() =>
  new LRUCache<string, V>({
    max: MAX_REMEMBERED_DOCUMENTS,
    ttl: REMEMBERED_MS,
    maxEntrySize: MAX_REMEMBERED_DOCUMENT_CHARS,
    sizeCalculation: (_value, text) => Math.max(1, text.length),
  });

/** yoga's `parserAndValidationCache`: its documents and parse errors by text, kept only for short texts. */
export const rememberedDocuments = () => ({ documentCache: byText<DocumentNode>(), errorCache: byText<Error>() });
