// The door's execute hooks run as one envelop hook (src/graphql/plugins/one-execute-hook.ts)
// exactly as envelop would run them apart: in order, a refusal stops the hooks after it, every
// onExecuteDone gathered so far sees the result (and what an earlier one set), and a hook that
// turns asynchronous fails loudly instead of being run out of order.
import { describe, expect, it } from 'vitest';
import { buildSchema, execute, parse, type ExecutionResult } from 'graphql';
import { envelop, type Plugin } from 'graphql-yoga';
import { oneExecuteHook } from '../../src/graphql/plugins/one-execute-hook.ts';

const schema = buildSchema('type Query { hello: String }');
const rootValue = { hello: 'world' };

async function run(plugins: Plugin[], merged: boolean) {
  const list = merged ? [...plugins, oneExecuteHook(plugins)] : plugins;
  // graphql-js's executor first, as yoga's engine plugin sets it.
  const engine: Plugin = { onExecute: ({ setExecuteFn }) => setExecuteFn(execute) };
  const { execute: run } = envelop({ plugins: [engine, ...list] as never[] })({});
  return (await run({ schema, document: parse('{ hello }'), rootValue, contextValue: {} })) as ExecutionResult;
}

function plugins(log: string[], refuseAt?: number): Plugin[] {
  return [0, 1, 2].map((i) => ({
    onExecute({ setResultAndStopExecution }) {
      log.push(`execute ${i}`);
      if (i === refuseAt) setResultAndStopExecution({ errors: [new (class extends Error {})(`refused by ${i}`)] as never });
      return {
        onExecuteDone({ result, setResult }) {
          log.push(`done ${i}: ${JSON.stringify((result as ExecutionResult).data ?? null)}`);
          setResult({ data: { hello: `${((result as ExecutionResult).data?.hello as string) ?? ''}+${i}` } });
        },
      };
    },
  }));
}

describe('the door execute hooks run as one', () => {
  it('run in order, and each onExecuteDone sees what the ones before it set, as envelop runs them apart', async () => {
    const apart: string[] = [];
    const together: string[] = [];
    const a = await run(plugins(apart), false);
    const b = await run(plugins(together), true);
    expect(b).toEqual(a);
    expect(together).toEqual(apart);
    expect(b.data).toEqual({ hello: 'world+0+1+2' });
  });

  it('stop at a refusal: the hooks after it do not run, the ones before it see its result', async () => {
    const apart: string[] = [];
    const together: string[] = [];
    const a = await run(plugins(apart, 1), false);
    const b = await run(plugins(together, 1), true);
    expect(together).toEqual(apart);
    expect(together).not.toContain('execute 2');
    expect(b.data).toEqual(a.data);
  });

  it('refuse a hook that returns a promise', async () => {
    const async: Plugin = { onExecute: async () => undefined };
    await expect(run([async], true)).rejects.toThrow(/synchronous/);
  });
});
