// Measures @pothos/plugin-complexity against forkline's query-cost estimate
// (src/graphql/query-cost.ts) on the client's real operations and the known
// attacks, printing a table. The plugin is not a dependency: install it in a
// scratch directory and name it:
//   mkdir /tmp/cx && cd /tmp/cx && npm init -y && npm install @pothos/plugin-complexity@4.2.3 @pothos/core graphql
//   POTHOS_COMPLEXITY_DIR=/tmp/cx/node_modules/@pothos/plugin-complexity npx tsx scripts/compare-query-cost.ts
// The plugin's configuration models the same multipliers: a page field's
// `first`/`last` (else the default page), `nodes(ids:)` its ids, objects 2,
// scalars 1, `Event.data` 10. It has no depth factor and no per-operation count.
import fs from 'node:fs';
import path from 'node:path';
import {
  Kind,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  parse,
  typeFromAST,
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLNamedType,
} from 'graphql';
import { schema } from '../src/graphql/schema.ts';
import { operationCost } from '../src/graphql/query-cost.ts';
import { DEFAULT_PAGE_SIZE } from '../src/graphql/builder.ts';
import { DEFAULT_LIMITS } from '../src/http/security.ts';

const dir = process.env.POTHOS_COMPLEXITY_DIR;
if (!dir) throw new Error('set POTHOS_COMPLEXITY_DIR to an installed @pothos/plugin-complexity (see the comment at the top)');
const { complexityFromQuery } = (await import(path.join(dir, 'esm/util.js'))) as {
  complexityFromQuery: (q: DocumentNode, o: { schema: typeof schema; variables?: Record<string, unknown> }) => { complexity: number; depth: number };
};

// The plugin reads `extensions.complexity` of each field: set what models forkline's multipliers.
for (const type of Object.values(schema.getTypeMap())) {
  if (!isObjectType(type) || type.name.startsWith('__')) continue;
  for (const field of Object.values(type.getFields())) {
    const leaf = !isObjectType(getNamedType(field.type)) && !('getFields' in getNamedType(field.type));
    const fieldCost = `${type.name}.${field.name}` === 'Event.data' ? 10 : leaf ? 1 : 2;
    const names = new Set(field.args.map((a) => a.name));
    const paged = names.has('first') || names.has('last');
    const complexity = (args: Record<string, unknown>) => {
      let multiplier = 1;
      if (paged) multiplier = Number(args.first ?? args.last ?? DEFAULT_PAGE_SIZE);
      else if (Array.isArray(args.ids)) multiplier = args.ids.length;
      return { field: fieldCost, multiplier };
    };
    (field as { extensions: Record<string, unknown> }).extensions = { ...field.extensions, complexity };
  }
}

/** Placeholder values for the required variables an operation declares (page sizes are left to their defaults). */
function placeholder(type: GraphQLInputType): unknown {
  if (isNonNullType(type)) return placeholder(type.ofType);
  if (isListType(type)) return [placeholder(type.ofType as GraphQLInputType)];
  const named = type as GraphQLNamedType;
  if (isEnumType(named)) return named.getValues()[0].name;
  if (isInputObjectType(named)) {
    const out: Record<string, unknown> = {};
    for (const f of Object.values(named.getFields())) if (isNonNullType(f.type)) out[f.name] = placeholder(f.type);
    return out;
  }
  return { Int: 1, Float: 1, Boolean: false, DateTime: new Date(0).toISOString() }[named.name] ?? 'x';
}

function variablesFor(doc: DocumentNode, given: Record<string, unknown>): Record<string, unknown> {
  const op = doc.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
  const out: Record<string, unknown> = { ...given };
  for (const v of op && op.kind === Kind.OPERATION_DEFINITION ? (op.variableDefinitions ?? []) : []) {
    if (v.type.kind !== Kind.NON_NULL_TYPE || v.variable.name.value in out) continue;
    out[v.variable.name.value] = placeholder(typeFromAST(schema, v.type) as GraphQLInputType);
  }
  return out;
}

const cases: Array<{ name: string; doc: DocumentNode; variables: Record<string, unknown> }> = [];
const opsDir = path.join(import.meta.dirname, '..', 'client', 'operations');
const files = fs.readdirSync(opsDir).filter((f) => f.endsWith('.graphql'));
const parsed = files.map((file) => [file, parse(fs.readFileSync(path.join(opsDir, file), 'utf8'))] as const);
// Fragments are shared across the files (codegen reads them as one document).
const fragments = parsed.flatMap(([, d]) => d.definitions.filter((x) => x.kind === Kind.FRAGMENT_DEFINITION));
for (const [file, all] of parsed) {
  for (const op of all.definitions) {
    if (op.kind !== Kind.OPERATION_DEFINITION || op.operation === 'subscription') continue;
    const doc: DocumentNode = { kind: Kind.DOCUMENT, definitions: [op, ...fragments] };
    cases.push({ name: `${file.replace('.graphql', '')}/${op.name?.value}`, doc, variables: variablesFor(doc, {}) });
  }
}
const aliased = (n: number, body: (i: number) => string) => Array.from({ length: n }, (_, i) => body(i)).join(' ');
const attacks: Array<[string, string, Record<string, unknown>]> = [
  [
    'attack: 30 × events(first: $n), n = 500',
    `query($id: ID!, $n: Int) { session(id: $id) { ${aliased(30, (i) => `e${i}: events(first: $n) { edges { node { seq type } } }`)} } }`,
    { id: 'x', n: 500 },
  ],
  [
    'attack: 10 × events(first: 500) { data }',
    `query($id: ID!) { session(id: $id) { ${aliased(10, (i) => `e${i}: events(first: 500) { edges { node { data } } }`)} } }`,
    { id: 'x' },
  ],
  ['attack: 5 × Session.recording aliased', `query($id: ID!) { session(id: $id) { ${aliased(5, (i) => `r${i}: recording`)} } }`, { id: 'x' }],
  ['attack: sessions(first: 100) { recording }', `{ sessions(first: 100) { edges { node { recording } } } }`, {}],
  ['attack: parent nested 12 deep', `query($id: ID!) { session(id: $id) { ${'parent { '.repeat(12)}id title${' }'.repeat(12)} } }`, { id: 'x' }],
  [
    'attack: children(first: 50) nested 4 deep',
    `query($id: ID!) { session(id: $id) { ${'children(first: 50) { edges { node { id '.repeat(4)}title${' } } }'.repeat(4)} } }`,
    { id: 'x' },
  ],
];
for (const [name, text, variables] of attacks) cases.push({ name, doc: parse(text), variables });

const rows = cases.map(({ name, doc, variables }) => {
  const ours = operationCost(schema, doc, undefined, variables);
  let plugin: string;
  try {
    plugin = String(Math.round(complexityFromQuery(doc, { schema, variables }).complexity));
  } catch (err) {
    plugin = `error: ${(err as Error).message.slice(0, 40)}`;
  }
  const once = Object.entries(ours.once)
    .map(([f, n]) => `${f}×${n}`)
    .join(' ');
  return [name, String(Math.round(ours.cost)), once, plugin];
});
const header = ['operation', 'forkline estimate', 'once-per-operation reads', 'plugin complexity'];
console.log(`limit: maxCost ${DEFAULT_LIMITS.maxCost}\n`);
console.log(`| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|`);
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
