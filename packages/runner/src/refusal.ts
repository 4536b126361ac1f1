// A batch the server refuses for what it holds (a broken rule, a body over its
// limit) fails the same way each time it is sent again: the runner records the
// failure instead of retrying (docs/runners.md, Refused batches).
import { ForklineClientError } from '@forkline/client';

/** Whether the server refused a batch for what it holds: sending it again fails the same way. */
export const isRefusal = (err: unknown): err is ForklineClientError =>
  err instanceof ForklineClientError && (err.code === 'BAD_USER_INPUT' || err.status === 413);
