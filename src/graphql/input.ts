// zod at the GraphQL boundary: every argument is parsed before it reaches the
// host or store; failures become BAD_USER_INPUT naming the argument.
// (The rules themselves are every door's: core/input-rules.ts.)
import { z } from 'zod';
import { idSchema, parseInput } from '../core/input-rules.ts';
import { MAX_PAGE_SIZE } from './builder.ts';

export const parseArgs = parseInput;

/** A session id argument (ids are opaque: beyond the id rule, their shape is checked by the lookup). */
export const sessionIdSchema = idSchema;

const pageSchema = z.object({
  first: z.number().int().min(0).max(MAX_PAGE_SIZE).nullish(),
  last: z.number().int().min(0).max(MAX_PAGE_SIZE).nullish(),
});

/** Validates Relay paging arguments (first/last within 0..MAX_PAGE_SIZE). */
export function pageArgs(args: { first?: number | null; last?: number | null }) {
  return parseArgs(pageSchema, { first: args.first, last: args.last });
}
