// Queries run as compiled JavaScript (graphql-jit): a document is compiled
// once per operation and each request runs the compiled function instead of
// graphql-js's generic executor walking the document, which had been a large
// share of the server's CPU on the hot reads (npm run bench, readThroughput,
// shows what it gains). Mutations and subscriptions keep the standard
// executor (neither is hot; subscriptions deliver through live-events).
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import {
  TypeInfo,
  getNamedType,
  getOperationAST,
  isEnumType,
  isSpecifiedScalarType,
  valueFromASTUntyped,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';

// null: not compilable, the standard executor runs it
type Compiled = { jit: CompiledQuery; defaults: [name: string, value: unknown][] } | null;

// graphql-jit 0.8 refuses a non-null variable with a default that the request
// leaves out (`$w: Boolean! = false` → "was not provided"), where the spec and
// graphql-js apply the default. Defaults the request omits are filled in as if
// the client had sent them, so graphql-jit coerces them like any input.
function variableDefaults(operation: OperationDefinitionNode | null | undefined): [string, unknown][] {
  return (operation?.variableDefinitions ?? []).filter((d) => d.defaultValue).map((d) => [d.variable.name.value, valueFromASTUntyped(d.defaultValue!)]);
}

function withDefaults(variables: Record<string, unknown> | null | undefined, defaults: [string, unknown][]): Record<string, unknown> {
  const values = variables ?? {};
  if (defaults.length === 0) return values; // most documents: no array made per request
  const missing = defaults.filter(([name]) => !Object.hasOwn(values, name));
  return missing.length === 0 ? values : { ...Object.fromEntries(missing), ...values };
}

/**
 * Whether every built-in scalar and enum the document selects is a field that
 * reads its parent's property as it is — a Pothos exposure (`t.exposeInt`…,
 * whose property TypeScript holds to the field's type: rows are read with their
 * columns' types) or a property read (property-reads.ts) — and every enum
 * among them has its names as values. Then serializing such a leaf would give
 * back the value itself, and graphql-jit may write it as it is
 * (`disableLeafSerialization`): its serializing call per leaf took a fresh
 * array of the field's locations and one of its response path, whether or not
 * it erred — most of what executing a page allocated (a sessions page of 50,
 * 250 such leaves). Custom scalars (DateTime, JSON…) are serialized either way.
 */
function leavesAsRead(schema: GraphQLSchema, document: DocumentNode): boolean {
  const typeInfo = new TypeInfo(schema);
  let asRead = true;
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Field(node) {
        if (node.name.value === '__typename') return;
        const def = typeInfo.getFieldDef();
        const type = def && getNamedType(def.type);
        if (!def || !type) return void (asRead = false);
        if (!isSpecifiedScalarType(type) && !isEnumType(type)) return;
        const reads = typeof def.extensions?.pothosExposedField === 'string' || def.extensions?.propertyRead === true;
        const namesAsValues = !isEnumType(type) || type.getValues().every((v) => v.value === v.name);
        if (!reads || !namesAsValues) asRead = false;
      },
    }),
  );
  return asRead;
}

export function useJitQueries(): Plugin {
  // Per document (yoga's parse cache hands out the same object for the same text), per operation.
  const cache = new WeakMap<DocumentNode, Map<string, Compiled>>();
  const compiledFor = (args: ExecutionArgs): Compiled => {
    let byOperation = cache.get(args.document);
    if (!byOperation) cache.set(args.document, (byOperation = new Map()));
    const key = args.operationName ?? '';
    let compiled = byOperation.get(key);
    if (compiled === undefined) {
      const result = compileQuery(args.schema, args.document, args.operationName ?? undefined, {
        disableLeafSerialization: leavesAsRead(args.schema, args.document),
      });
      compiled = isCompiledQuery(result) ? { jit: result, defaults: variableDefaults(getOperationAST(args.document, args.operationName)) } : null;
      byOperation.set(key, compiled);
    }
    return compiled;
  };
  return {
    onExecute({ args, setExecuteFn }) {
      if (getOperationAST(args.document, args.operationName)?.operation !== 'query') return;
      const compiled = compiledFor(args);
      if (compiled) {
        setExecuteFn(
          (a) =>
            compiled.jit.query(a.rootValue, a.contextValue, withDefaults(a.variableValues, compiled.defaults)) as ExecutionResult | Promise<ExecutionResult>,
        );
      }
    },
  };
}
