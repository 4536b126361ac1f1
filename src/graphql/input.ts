// zod at the GraphQL boundary: every argument is parsed before it reaches the
// host or store; failures become BAD_USER_INPUT naming the argument.
import { z } from 'zod';
import { badInput } from '../core/errors.ts';
import { MAX_PAGE_SIZE } from './builder.ts';

export function parseArgs<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const r = schema.safeParse(value);
  if (!r.success) {
    throw badInput(r.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; '));
  }
  return r.data;
}

/** A session id argument (ids are opaque: their shape is checked by the lookup, not here). */
export const sessionIdSchema = z.string().min(1).max(200);

const pageSchema = z.object({
  first: z.number().int().min(0).max(MAX_PAGE_SIZE).nullish(),
  last: z.number().int().min(0).max(MAX_PAGE_SIZE).nullish(),
});

/** Validates Relay paging arguments (first/last within 0..MAX_PAGE_SIZE). */
export function pageArgs(args: { first?: number | null; last?: number | null }) {
  return parseArgs(pageSchema, { first: args.first, last: args.last });
}
