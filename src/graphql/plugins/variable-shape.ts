// The shape of a request's variables, bounded before graphql-js coerces them
// (docs/operations.md "Event-loop time"). Coercion copies and checks every list
// item and input object in one synchronous stretch, several microseconds each,
// before any resolver's zod bound can refuse the list: 100,000 tiny items held
// the event loop for seconds. And it reports each field an input object does
// not define, and each required one it lacks, with a printout of the whole
// object (up to 51 errors per request): 100,000 unknown fields cost 51
// printouts of 100,000 fields each. So here, walking the values along their
// declared types: the list items of all variables together are at most
// MAX_VARIABLE_LIST_ITEMS, and an input object holds its type's required
// fields and no others. JSON scalars are not walked (MAX_JSON_VALUES,
// text-input.ts, bounds them; coercion takes them as they are).
import {
  getNamedType,
  getOperationAST,
  isInputObjectType,
  isListType,
  isNonNullType,
  typeFromAST,
  type DocumentNode,
  type ExecutionArgs,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLSchema,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { MAX_APPEND_BATCH } from '../../store/session-store.ts';
import { requestError } from './error-codes.ts';
import { refuseOperation } from './refuse-operation.ts';

/** List items in one request's variables together: the largest list the schema takes is appendEvents' batch. */
export const MAX_VARIABLE_LIST_ITEMS = MAX_APPEND_BATCH;

/** Why the variables are refused: the list that passed the bound. */
export const tooManyListItems = (path: string) =>
  `variables: ${path} passes the ${MAX_VARIABLE_LIST_ITEMS} list items a request's variables may hold together: send fewer per request`;

/** The variables whose type holds a list or an input object (the others coerce in constant time). */
type Shaped = [name: string, type: GraphQLInputType][];

// Per document (yoga's parse cache hands out the same document for the same text), per operation.
const shapedOf = new WeakMap<DocumentNode, Map<string, Shaped>>();

function shapedVariables(schema: GraphQLSchema, document: DocumentNode, operationName: string | null | undefined): Shaped {
  let byOperation = shapedOf.get(document);
  if (!byOperation) shapedOf.set(document, (byOperation = new Map()));
  const key = operationName ?? '';
  let shaped = byOperation.get(key);
  if (!shaped) {
    const operation = getOperationAST(document, operationName);
    if (!operation) return []; // execution refuses it; not kept, or any number of names would be
    shaped = [];
    for (const def of operation.variableDefinitions ?? []) {
      const type = typeFromAST(schema, def.type) as GraphQLInputType | undefined;
      if (type && (isListType(isNonNullType(type) ? type.ofType : type) || isInputObjectType(getNamedType(type)))) shaped.push([def.variable.name.value, type]);
    }
    byOperation.set(key, shaped);
  }
  return shaped;
}

const required = new WeakMap<GraphQLInputObjectType, string[]>();

/** The fields of `type` a value must hold (non-null, no default). */
function requiredOf(type: GraphQLInputObjectType): string[] {
  let names = required.get(type);
  if (!names) {
    names = Object.values(type.getFields())
      .filter((f) => isNonNullType(f.type) && f.defaultValue === undefined)
      .map((f) => f.name);
    required.set(type, names);
  }
  return names;
}

/** Walks `value` as `type` coerces it; answers the refusal, or undefined. `count` holds the list items seen so far. */
function walk(value: unknown, type: GraphQLInputType, path: string, count: { items: number }): string | undefined {
  if (isNonNullType(type)) type = type.ofType;
  if (value === null || typeof value !== 'object') return undefined;
  if (isListType(type)) {
    // A value that is not a list is coerced as a list of one.
    if (!Array.isArray(value)) return walk(value, type.ofType, path, count);
    count.items += value.length;
    if (count.items > MAX_VARIABLE_LIST_ITEMS) return tooManyListItems(path);
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === null || typeof item !== 'object') continue; // the common case: no path string per item
      const refused = walk(item, type.ofType, `${path}[${i}]`, count);
      if (refused) return refused;
    }
    return undefined;
  }
  if (!isInputObjectType(type) || Array.isArray(value)) return undefined;
  const fields = type.getFields();
  for (const name of requiredOf(type)) {
    if ((value as Record<string, unknown>)[name] === undefined)
      return `variables: ${path}: field "${name}" of required type "${String(fields[name].type)}" was not provided`;
  }
  for (const name of Object.keys(value)) {
    const field = Object.hasOwn(fields, name) ? fields[name] : undefined;
    if (!field) return `variables: ${path}: field "${name.slice(0, 100)}" is not defined by type "${type.name}"`;
    const refused = walk((value as Record<string, unknown>)[name], field.type, `${path}.${name}`, count);
    if (refused) return refused;
  }
  return undefined;
}

function refusal(args: ExecutionArgs): string | undefined {
  const variables = args.variableValues;
  if (!variables) return undefined;
  const shaped = shapedVariables(args.schema, args.document, args.operationName);
  const count = { items: 0 };
  for (const [name, type] of shaped) {
    const refused = Object.hasOwn(variables, name) ? walk(variables[name], type, `$${name}`, count) : undefined;
    if (refused) return refused;
  }
  return undefined;
}

export function useVariableShape(): Plugin {
  return refuseOperation((args) => {
    const refused = refusal(args);
    return refused ? { errors: [requestError(refused)] } : undefined;
  });
}
