// Another tenant's session reads as one that does not exist, through every
// door of the schema. The fields are generated from the schema, so a new root
// field or Session field that takes a session id is walked without anyone
// adding it here: each is called with another tenant's session id and with an
// id no session has, and the two answers must be the same (nothing tells the
// session exists) and say not found — SESSION_NOT_FOUND, or null / nothing
// where a lookup answers that way. Nothing of the other tenant's session
// changes. (store/tenant-store.ts: the view every resolver reads through.)
import {
  execute,
  getNamedType,
  parse,
  getNullableType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
} from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../../src/graphql/schema.ts';
import type { Context } from '../../src/graphql/context.ts';
import { SessionLoader } from '../../src/graphql/session-loader.ts';
import { ALL_SCOPES } from '../../src/core/api-tokens.ts';
import { ForklineError } from '../../src/core/errors.ts';
import type { TenantStore } from '../../src/store/session-store.ts';
import { eventId, newSessionId } from '../../src/store/ids.ts';
import { startTestApp, type TestApp, type GqlResponse } from '../helpers/app.ts';
import { subscribeSse } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { REFERENCE_LOG } from '../spec/reference-log.ts';

/** Arguments and input fields that name a session. */
const SESSION_ID_NAMES = new Set(['id', 'ids', 'sessionId', 'parentId', 'with']);
/** Root fields whose `id` names something else than a session. */
const NOT_A_SESSION_ID = new Map([['Mutation.revokeApiToken', 'an API token id']]);
/** Values the schema's types alone do not tell (a value refused as input would be refused before the session is looked up). */
const INPUT_VALUES: Record<string, unknown> = {
  'NewEventInput.type': 'plugin/test/probe',
  'ModelConfigInput.provider': 'scripted',
  'ModelConfigInput.model': 'scripted',
  'SetSessionToolsInput.tools': ['clock'],
};

let app: TestApp;
let other: string; // the other tenant's session
let own: string; // the caller's
const me = { tenant: 'local' }; // no tokens: every request is tenant local's

beforeAll(async () => {
  app = await startTestApp();
  const o = await app.services.store.createSession({ tenant: 'other' }, { title: 'not yours' });
  await app.services.store.append(o.id, REFERENCE_LOG);
  other = o.id;
  own = (await app.services.store.createSession(me, { title: 'mine' })).id;
});
afterAll(() => app?.close());

const takesSessionId = (type: GraphQLInputType, name: string, depth = 0): boolean => {
  const named = getNamedType(type);
  if (named.name === 'ID') return SESSION_ID_NAMES.has(name);
  return isInputObjectType(named) && depth < 2 && Object.values(named.getFields()).some((f) => takesSessionId(f.type, f.name, depth + 1));
};

/** A value of `type` for argument or input field `name` (`where`: its owner's name), with `sessionId` wherever a session is named. */
function valueOf(type: GraphQLInputType, name: string, where: string, sessionId: string): unknown {
  if (`${where}.${name}` in INPUT_VALUES) return INPUT_VALUES[`${where}.${name}`];
  const t = getNullableType(type);
  if (isListType(t)) return [valueOf(t.ofType, name, where, sessionId)];
  if (isEnumType(t)) return t.getValues()[0].name;
  if (isInputObjectType(t)) {
    const fields = Object.values(t.getFields()).filter((f) => isNonNullType(f.type) || takesSessionId(f.type, f.name));
    return Object.fromEntries(fields.map((f) => [f.name, valueOf(f.type, f.name, t.name, sessionId)]));
  }
  if (!isScalarType(t)) throw new Error(`no value for ${where}.${name}`);
  switch (t.name) {
    case 'ID':
      return SESSION_ID_NAMES.has(name) ? sessionId : 'in_0';
    case 'String':
      return 'probe';
    case 'Int':
    case 'Float':
      return 1;
    case 'Boolean':
      return false;
    case 'DateTime':
      return new Date(0).toISOString();
    default:
      return {};
  }
}

/** The arguments a call passes: the required ones, and every one that names a session (deprecated ones aside when another does). */
function argsOf(field: GraphQLField<unknown, unknown>): GraphQLArgument[] {
  const naming = field.args.filter((a) => takesSessionId(a.type, a.name));
  const current = naming.filter((a) => !a.deprecationReason);
  return field.args.filter((a) => isNonNullType(a.type) || (current.length ? current : naming).includes(a));
}

/** `name(args) { __typename }` for a field, its arguments as variables, and their values for `sessionId`. */
function callOf(field: GraphQLField<unknown, unknown>, where: string, sessionId: string) {
  const args = argsOf(field);
  const vars = Object.fromEntries(args.map((a) => [`${field.name}_${a.name}`, valueOf(a.type, a.name, where, sessionId)]));
  const call = `${field.name}${args.length ? `(${args.map((a) => `${a.name}: $${field.name}_${a.name}`).join(', ')})` : ''}`;
  const named = getNamedType(field.type);
  // A connection shows its edges: an empty one is what a lookup that found nothing answers.
  const selection =
    isScalarType(named) || isEnumType(named) ? '' : isObjectType(named) && named.getFields().edges ? ' { __typename edges { __typename } }' : ' { __typename }';
  return { call: call + selection, decls: args.map((a) => `$${field.name}_${a.name}: ${String(a.type)}`), vars };
}

const rootFields = (root: 'Query' | 'Mutation' | 'Subscription') =>
  Object.values((schema.getType(root) as GraphQLObjectType).getFields()).filter(
    (f) => !NOT_A_SESSION_ID.has(`${root}.${f.name}`) && f.args.some((a) => takesSessionId(a.type, a.name)),
  );
const sessionFields = Object.values((schema.getType('Session') as GraphQLObjectType).getFields());

/** The answer with the id it was asked with replaced, so two answers compare. */
const withoutId = (r: GqlResponse, id: string) => JSON.parse(JSON.stringify({ data: r.data ?? null, errors: r.errors ?? [] }).replaceAll(id, '<id>'));
const codesOf = (r: GqlResponse) => (r.errors ?? []).map((e) => e.extensions?.code);
/** Null, an empty list, a list of nulls or an empty connection: a lookup that found nothing. */
const nothing = (v: unknown): boolean =>
  v === null ||
  (Array.isArray(v) && v.every((x) => x === null)) ||
  (typeof v === 'object' && v !== null && 'edges' in v && Array.isArray(v.edges) && v.edges.length === 0);

async function ask(root: 'query' | 'mutation', field: GraphQLField<unknown, unknown>, where: string, sessionId: string) {
  const { call, decls, vars } = callOf(field, where, sessionId);
  return app.gql(`${root} Probe${decls.length ? `(${decls.join(', ')})` : ''} { ${call} }`, vars);
}

async function otherSessionAsIs() {
  const row = await app.services.store.getSession({ tenant: 'other' }, other);
  return row && { title: row.title, eventCount: row.eventCount, updatedAt: row.updatedAt.toISOString(), status: row.status };
}

describe("another tenant's session reads as not found", () => {
  it('the walk covers the fields that name a session', () => {
    const names = [...rootFields('Query'), ...rootFields('Mutation'), ...rootFields('Subscription')].map((f) => f.name);
    expect(names).toEqual(expect.arrayContaining(['session', 'node', 'sendMessage', 'forkSession', 'deleteSession', 'appendEvents', 'sessionEvents']));
    expect(sessionFields.length).toBeGreaterThan(30);
  });

  it('every root query and mutation that takes a session id: SESSION_NOT_FOUND (or nothing, for a lookup), as for a missing id', async () => {
    const before = await otherSessionAsIs();
    const seen: string[] = [];
    for (const [root, kind] of [
      ['Query', 'query'],
      ['Mutation', 'mutation'],
    ] as const) {
      for (const field of rootFields(root)) {
        const missing = newSessionId();
        const theirs = await ask(kind, field, root, other);
        const none = await ask(kind, field, root, missing);
        const what = `${root}.${field.name}: ${JSON.stringify(theirs)}`;
        expect(withoutId(theirs, other), what).toEqual(withoutId(none, missing));
        if (root === 'Mutation' || theirs.errors?.length) expect(codesOf(theirs), what).toEqual(['SESSION_NOT_FOUND']);
        else expect(nothing(theirs.data?.[field.name]), what).toBe(true);
        seen.push(field.name);
      }
    }
    expect(seen).toContain('setSessionTitle');
    expect(await otherSessionAsIs()).toEqual(before);
  });

  it('every subscription that takes a session id: SESSION_NOT_FOUND', async () => {
    for (const field of rootFields('Subscription')) {
      const { call, decls, vars } = callOf(field, 'Subscription', other);
      const sub = subscribeSse(app.url, `subscription Probe(${decls.join(', ')}) { ${call} }`, vars);
      try {
        await waitFor(() => sub.errors.length > 0 || sub.items.length > 0, { what: `${field.name} answers` });
        expect(sub.items, field.name).toEqual([]);
        expect(JSON.stringify(sub.errors), field.name).toContain('SESSION_NOT_FOUND');
      } finally {
        await sub.close();
      }
    }
  });

  it('every Session field, asked of their session, is the null of a missing one', async () => {
    for (const field of sessionFields) {
      const { call, decls, vars } = callOf(field, 'Session', other);
      const q = (id: string) => app.gql(`query Probe($sid: ID!${decls.map((d) => `, ${d}`).join('')}) { session(id: $sid) { ${call} } }`, { ...vars, sid: id });
      const missing = newSessionId();
      const [theirs, none] = [await q(other), await q(missing)];
      expect(theirs, field.name).toEqual({ status: 200, data: { session: null }, errors: undefined });
      expect(none, field.name).toEqual(theirs);
      // Through node(id) too.
      const n = await app.gql(`query Probe($sid: ID!${decls.map((d) => `, ${d}`).join('')}) { node(id: $sid) { ... on Session { ${call} } } }`, {
        ...vars,
        sid: other,
      });
      expect(n, field.name).toEqual({ status: 200, data: { node: null }, errors: undefined });
    }
    expect(await app.gql(`query($id: ID!) { node(id: $id) { id } }`, { id: eventId(other, 0) })).toEqual({
      status: 200,
      data: { node: null },
      errors: undefined,
    });
  });

  it('every Session field that takes a session id, on your own session with theirs: SESSION_NOT_FOUND, as for a missing id', async () => {
    const naming = sessionFields.filter((f) => f.args.some((a) => takesSessionId(a.type, a.name)));
    expect(naming.map((f) => f.name)).toContain('commonPrefix');
    for (const field of naming) {
      const ask = (id: string) => {
        const { call, decls, vars } = callOf(field, 'Session', id);
        return app.gql(`query Probe($sid: ID!${decls.map((d) => `, ${d}`).join('')}) { session(id: $sid) { ${call} } }`, { ...vars, sid: own });
      };
      const missing = newSessionId();
      const [theirs, none] = [await ask(other), await ask(missing)];
      expect(codesOf(theirs), field.name).toEqual(['SESSION_NOT_FOUND']);
      expect(withoutId(theirs, other), field.name).toEqual(withoutId(none, missing));
    }
  });

  it('every Session field that reads past the row checks the tenant itself, even handed a row of theirs', async () => {
    // As if a resolver had read a row without its tenant: the view hands out the other tenant's row,
    // and every field that reads the log, files, search or other rows must still find nothing.
    const view = app.services.store.forTenant(me);
    const leaked = (await app.services.store.getSession({ tenant: 'other' }, other))!;
    const store: TenantStore = Object.assign(Object.create(view) as TenantStore, { getSession: async () => leaked, requireSession: async () => leaked });
    const contextValue: Context = {
      scope: me,
      caller: { tenant: me.tenant, scopes: ALL_SCOPES },
      store,
      services: app.services,
      sessionLoader: new SessionLoader(view),
    };
    const answered: string[] = [];
    // Fields made from the row's own columns (as title is), which the leaked row holds.
    const ofRow = new Set(['model']);
    for (const field of sessionFields) {
      const { call, decls, vars } = callOf(field, 'Session', other);
      const document = parse(`query Probe($sid: ID!${decls.map((d) => `, ${d}`).join('')}) { session(id: $sid) { ${call} } }`);
      const r = await execute({ schema, document, variableValues: { ...vars, sid: other }, contextValue });
      const codes = (r.errors ?? []).map((e) => (e.originalError instanceof ForklineError ? e.originalError.code : e.message));
      if (codes.length) expect(codes, field.name).toEqual(['SESSION_NOT_FOUND']);
      else if (!(field.name in leaked) && !ofRow.has(field.name) && !nothing((r.data?.session as Record<string, unknown>)[field.name]))
        answered.push(field.name);
    }
    // commonPrefix compares two rows, both read through the view (here: the leaked one).
    expect(answered).toEqual(['commonPrefix']);
  });
});
