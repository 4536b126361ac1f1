// The estimated cost of an operation, with the request's variables: what the
// query limits (plugins/limits.ts) refuse before anything runs.
//
// The formula is GraphQL Armor's cost limit (scalars 1, objects 2, each level
// down ×1.5, a page's size multiplies its subtree), which reads only literal
// `first`/`last`: a page size sent as a variable, or left to the connection's
// default, cost nothing there, so a query with 30 aliased `events(first: $n)`
// passed with n = 500. Here a page size is the literal, else the variable's
// value, else the variable's default, else the argument's default, else the
// connection's default page; `nodes(ids:)` multiplies by its ids (and
// `sessionsTurns(sessions:)` by the sessions it follows); leaves that
// can be large (`Event.data`) weigh more than a scalar. A fragment (spread or
// inline) costs what its selections would cost written in place: it is not a
// level of the response. `Session.recording` (a session's whole log as one
// string) is not priced but counted: an operation may read at most one
// (plugins/limits.ts; GET /recordings streams any number).
//
// Kept rather than @pothos/plugin-complexity, measured against it on the
// client's operations and the known attacks (scripts/compare-query-cost.ts,
// docs/operations.md "Limits"): with the same page-size multipliers the plugin
// has no depth factor and no once-per-operation count, and prices the aliased
// page attacks about 4× lower, under the same limit.
import {
  Kind,
  getNamedType,
  getOperationAST,
  isListType,
  getNullableType,
  type ArgumentNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import { DEFAULT_PAGE_SIZE } from './builder.ts';

const SCALAR_COST = 1;
const OBJECT_COST = 2;
const DEPTH_FACTOR = 1.5;

/**
 * Leaves that cost more than a scalar: an event's data is a JSON value of any
 * size (a tool result, a file change set), so ten aliased pages of 500 events
 * with their data reach the default limit of 100,000.
 */
export const FIELD_COSTS: Readonly<Record<string, number>> = { 'Event.data': 10 };
/**
 * Objects made of their parent's row (no read of their own, no list inside):
 * priced as their leaves, as if they were the row's scalars.
 */
export const ROW_OBJECTS: readonly string[] = ['Session.model'];
/**
 * Fields an operation may read at most once (with every page size around them counted): a session's whole log,
 * and the schema (introspection costs nothing in the estimate, and 30 aliases of one `__schema` read of types,
 * fields and their types made 3.4 MB and held the event loop for seconds; of a `__type`, 150 KB and 0.3 s of CPU);
 * a file's content (up to 1 MiB), a range's diffs (4 MiB of text, 2 s of diffing), a tree's listing (the quota's
 * 20,000 entries, its change sets folded), the notes (1,000 of up to 100,000 characters) and a session's tools (a
 * runner's 500 of 64 KiB schemas, 32 MB): each is bounded per read, and a page of 500 sessions made it 500 reads,
 * under the cost limit (100 listings of one tree of 19,000 files took the database pool for 15 s).
 */
export const ONCE_PER_OPERATION: readonly string[] = [
  'Session.recording',
  'Query.__schema',
  'Query.__type',
  'Session.file',
  'Session.files',
  'Session.fileChanges',
  'Session.workspace',
  'Session.tools',
];

/** What an operation would read: its estimated cost, and how many times it reads each once-per-operation field. */
export interface OperationCost {
  cost: number;
  /** Field (`Type.field`) → times read, page sizes multiplied through; only fields of ONCE_PER_OPERATION that occur. */
  once: Record<string, number>;
}

type Variables = Readonly<Record<string, unknown>> | null | undefined;

interface Walk {
  schema: GraphQLSchema;
  operation: OperationDefinitionNode;
  fragments: Map<string, FragmentDefinitionNode>;
  variables: Variables;
  /** Set when a variable's value was read: the cost then holds for these variables only. */
  readVariables: boolean;
  /** Per fragment name: its cost, and its once-per-operation reads (a cycle counts nothing more). */
  fragmentCosts: Map<string, OperationCost>;
  /** The once-per-operation reads met so far, each times the page sizes around it. */
  once: Record<string, number>;
  /** The product of the page sizes around the selection being walked. */
  scale: number;
}

// Per document (yoga's parse cache hands out the same object for the same
// text) and operation: the cost of operations whose page sizes read no variable.
const fixedCosts = new WeakMap<DocumentNode, Map<string, OperationCost>>();

/** The cost of the operation `operationName` of `document` run with `variables` (0 if there is no such operation). */
export function queryCost(schema: GraphQLSchema, document: DocumentNode, operationName: string | null | undefined, variables: Variables): number {
  return operationCost(schema, document, operationName, variables).cost;
}

/** The cost of the operation and its once-per-operation reads. */
export function operationCost(schema: GraphQLSchema, document: DocumentNode, operationName: string | null | undefined, variables: Variables): OperationCost {
  const key = operationName ?? '';
  const known = fixedCosts.get(document)?.get(key);
  if (known !== undefined) return known;
  const operation = getOperationAST(document, operationName);
  if (!operation) return { cost: 0, once: {} };
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const walk: Walk = { schema, operation, fragments, variables, readVariables: false, fragmentCosts: new Map(), once: {}, scale: 1 };
  const root = schema.getRootType(operation.operation);
  let cost = 0;
  for (const selection of operation.selectionSet.selections) cost += selectionCost(walk, selection, root);
  const result = { cost, once: walk.once };
  if (!walk.readVariables) {
    let byOperation = fixedCosts.get(document);
    if (!byOperation) fixedCosts.set(document, (byOperation = new Map()));
    byOperation.set(key, result);
  }
  return result;
}

/** A selection's cost; a fragment's is the sum of its selections', as if they were written in its place. */
function selectionCost(walk: Walk, node: SelectionSetNode['selections'][number], parent: GraphQLNamedType | null | undefined): number {
  if (node.kind === Kind.FIELD) return fieldCost(walk, node, parent);
  if (node.kind === Kind.INLINE_FRAGMENT) {
    const type = node.typeCondition ? walk.schema.getType(node.typeCondition.name.value) : parent;
    return selectionsCost(walk, node.selectionSet, type);
  }
  // A fragment spread: its definition walked once per name, its reads then counted at each spread's scale.
  const name = node.name.value;
  let known = walk.fragmentCosts.get(name);
  if (known === undefined) {
    const fragment = walk.fragments.get(name);
    walk.fragmentCosts.set(name, { cost: 0, once: {} });
    const outer = { once: walk.once, scale: walk.scale };
    walk.once = {};
    walk.scale = 1;
    const cost = fragment ? selectionsCost(walk, fragment.selectionSet, walk.schema.getType(fragment.typeCondition.name.value)) : 0;
    known = { cost, once: walk.once };
    walk.fragmentCosts.set(name, known);
    walk.once = outer.once;
    walk.scale = outer.scale;
  }
  for (const [field, times] of Object.entries(known.once)) walk.once[field] = (walk.once[field] ?? 0) + times * walk.scale;
  return known.cost;
}

/** The selections of a set, each a level below it. */
function selectionsCost(walk: Walk, set: SelectionSetNode, type: GraphQLNamedType | null | undefined): number {
  let cost = 0;
  for (const child of set.selections) cost += selectionCost(walk, child, type);
  return cost;
}

function setCost(walk: Walk, set: SelectionSetNode, type: GraphQLNamedType | null | undefined): number {
  return OBJECT_COST + DEPTH_FACTOR * selectionsCost(walk, set, type);
}

function fieldCost(walk: Walk, node: FieldNode, parent: GraphQLNamedType | null | undefined): number {
  const name = node.name.value;
  const qualified = parent ? `${parent.name}.${name}` : name;
  if (ONCE_PER_OPERATION.includes(qualified)) walk.once[qualified] = (walk.once[qualified] ?? 0) + walk.scale;
  // Introspection (GraphiQL) is bounded by the schema, and read once (ONCE_PER_OPERATION).
  if (name === '__schema' || name === '__type') return 0;
  const def = parent && 'getFields' in parent ? (parent.getFields()[name] as GraphQLField<unknown, unknown> | undefined) : undefined;
  if (!node.selectionSet) return FIELD_COSTS[qualified] ?? SCALAR_COST;
  if (ROW_OBJECTS.includes(qualified)) return selectionsCost(walk, node.selectionSet, def && getNamedType(def.type));
  const times = def ? multiplier(walk, node, def) : 1;
  const outer = walk.scale;
  walk.scale = outer * times;
  try {
    return setCost(walk, node.selectionSet, def && getNamedType(def.type)) * times;
  } finally {
    walk.scale = outer;
  }
}

/** List arguments that say how many items (or streams) a field returns: each counts its subtree once. */
const COUNTED_LISTS = ['ids', 'sessions'];

/** How many items the field returns at most: its page size, or its number of ids (sessions). */
function multiplier(walk: Walk, node: FieldNode, def: GraphQLField<unknown, unknown>): number {
  const argOf = (name: string) => def.args.find((a) => a.name === name);
  const first = argOf('first');
  const last = argOf('last');
  if (first || last) {
    const sizes = [first, last].flatMap((a) => (a ? [argumentValue(walk, node.arguments, a)] : []));
    const given = sizes.filter((s): s is number => typeof s === 'number' && Number.isFinite(s));
    if (given.length) return Math.max(1, ...given);
    // Omitted: a connection's default page. A plain list whose `first` only trims it (Turn.steps) is priced as a list
    // without one is, so a query that read it before it took `first` costs what it did.
    return isListType(getNullableType(def.type)) ? 1 : DEFAULT_PAGE_SIZE;
  }
  const ids = COUNTED_LISTS.map(argOf).find((a) => a !== undefined);
  if (ids && isListType(getNullableType(ids.type))) {
    const list = argumentValue(walk, node.arguments, ids);
    return Math.max(1, Array.isArray(list) ? list.length : 1);
  }
  return 1;
}

/** The argument's value as the request gives it (a literal, a variable or its default), else the schema's default. */
function argumentValue(walk: Walk, args: readonly ArgumentNode[] | undefined, arg: GraphQLArgument): unknown {
  const node = args?.find((a) => a.name.value === arg.name);
  const value = node ? valueOf(walk, node.value) : undefined;
  return value ?? arg.defaultValue;
}

function valueOf(walk: Walk, value: ValueNode): unknown {
  switch (value.kind) {
    case Kind.INT:
      return Number(value.value);
    case Kind.LIST:
      return value.values;
    case Kind.VARIABLE: {
      const name = value.name.value;
      walk.readVariables = true;
      const given = walk.variables?.[name];
      if (typeof given === 'number' || Array.isArray(given)) return given;
      const definition = walk.operation.variableDefinitions?.find((d) => d.variable.name.value === name);
      return definition?.defaultValue ? valueOf(walk, definition.defaultValue) : undefined;
    }
    default:
      return undefined;
  }
}
