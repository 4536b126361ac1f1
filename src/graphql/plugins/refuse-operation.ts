// The hooks of a plugin that refuses an operation before it runs, the same way
// whether it executes (queries, mutations: yoga, the fast lane, graphql-ws) or
// subscribes: `check` answers the result to send instead, or undefined.
import type { ExecutionArgs, ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';

export function refuseOperation(check: (args: ExecutionArgs) => ExecutionResult | undefined): Pick<Plugin, 'onExecute' | 'onSubscribe'> {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const refused = check(args);
      if (refused) setResultAndStopExecution(refused);
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const refused = check(args);
      if (refused) setResultAndStopExecution(refused);
    },
  };
}
