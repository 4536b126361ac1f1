// A subscription over HTTP whose Accept header names no streaming type is
// answered 406 by yoga after it subscribed: the stream is then never read,
// and was never closed, so its source (and the active-subscriptions gauge)
// stayed open for the life of the process. Closed here instead.
import { isAsyncIterable, type Plugin } from 'graphql-yoga';

export function useCloseUnsentStreams(): Plugin {
  return {
    // Registered after yoga's result processors: `resultProcessor` says whether one of them will send the result.
    onResultProcess({ result, resultProcessor }) {
      if (!resultProcessor && isAsyncIterable(result)) void result[Symbol.asyncIterator]().return?.();
    },
  };
}
