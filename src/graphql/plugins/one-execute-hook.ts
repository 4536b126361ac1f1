// envelop runs each plugin's onExecute hook in a chain of its own, per
// request: for every hook a payload with three closures and a handful of
// promise-like objects and closures (@whatwg-node/promise-helpers), whether or
// not the hook is asynchronous, and again for every onExecuteDone. With the
// door's eight such hooks that chain was about a third of all a hot read
// allocated (V8's sampling heap profiler under `npm run bench:read-alternation`;
// ARCHITECTURE.md, "A rule for every request"). The door's own hooks are synchronous:
// they are taken out of their plugins and run here, in their order, as envelop
// would run them — a hook that stops execution stops the ones after it, and
// every onExecuteDone gathered so far sees the result — inside one hook.
import type { Plugin } from 'graphql-yoga';

type OnExecute = NonNullable<Plugin['onExecute']>;
type ExecutePayload = Parameters<OnExecute>[0];
type ExecuteDone = Extract<Awaited<ReturnType<OnExecute>>, object>;
type DonePayload = Parameters<NonNullable<ExecuteDone['onExecuteDone']>>[0];

const isThenable = (x: unknown): boolean => typeof (x as PromiseLike<unknown> | undefined)?.then === 'function';

function notSynchronous(what: string): Error {
  return new Error(
    `${what} returned a promise or stream hooks: the door's execute hooks run together only while synchronous (graphql/plugins/one-execute-hook.ts)`,
  );
}

// Per request, closures are object literals' methods only: tsx (esbuild's keepNames) names every closure
// assigned to a variable with an Object.defineProperty call, each time it is made.

/** The onExecuteDone hooks `done` as one, each given the result the ones before it left. */
function allDone(done: ExecuteDone[]): ExecuteDone {
  if (done.length === 1) return done[0];
  return {
    onExecuteDone(payload) {
      const each: DonePayload = {
        args: payload.args,
        result: payload.result,
        setResult(result) {
          each.result = result;
          payload.setResult(result);
        },
      };
      for (const d of done) if (d.onExecuteDone?.(each)) throw notSynchronous('an onExecuteDone hook');
    },
  };
}

/**
 * One plugin running the onExecute hooks of `plugins` (synchronous ones: a
 * hook that returns a promise throws), which lose theirs. Register it after
 * them, before any other plugin with an onExecute hook that should run after
 * them.
 */
export function oneExecuteHook(plugins: readonly Plugin[]): Plugin {
  const hooks: OnExecute[] = [];
  for (const plugin of plugins) {
    if (!plugin.onExecute) continue;
    hooks.push(plugin.onExecute);
    plugin.onExecute = undefined;
  }
  return {
    onExecute(payload) {
      let stopped = false;
      // Written out: `{ ...payload, setResultAndStopExecution }` (a spread followed by a property) is a runtime call in V8.
      const own: ExecutePayload = {
        args: payload.args,
        context: payload.context,
        executeFn: payload.executeFn,
        setExecuteFn: payload.setExecuteFn,
        extendContext: payload.extendContext,
        setResultAndStopExecution(result) {
          stopped = true;
          payload.setResultAndStopExecution(result);
        },
      };
      let done: ExecuteDone[] | undefined;
      for (const hook of hooks) {
        const after = hook(own);
        if (after) {
          if (isThenable(after)) throw notSynchronous('an onExecute hook');
          (done ??= []).push(after as ExecuteDone);
        }
        if (stopped) break;
      }
      return done && allDone(done);
    },
  };
}
