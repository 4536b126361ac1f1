// One server's compiled schemas, kept by content (agent/mcp/mcp-tools.ts
// SchemaValidators; docs/mcp.md "Names, arguments, results"): a schema is
// checked by its own content even when another had its `$id`, and one that
// does not compile is not compiled again.
import { Ajv } from 'ajv';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SchemaValidators } from '../../src/agent/mcp/schema-validators.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('SchemaValidators', () => {
  it('a schema whose $id another schema of the server had is checked by its own content; one that does not compile is not compiled again', () => {
    const validators = new SchemaValidators();
    const asNumber = validators.check({ $id: 'https://example.com/same.json', type: 'object', properties: { n: { type: 'number' } } });
    const asString = validators.check({ $id: 'https://example.com/same.json', type: 'object', properties: { n: { type: 'string' } } });
    expect(asNumber({ n: 1 }).valid).toBe(true);
    expect(asNumber({ n: 'a' }).valid).toBe(false);
    expect(asString({ n: 'a' }).valid).toBe(true);
    expect(asString({ n: 1 }).valid).toBe(false);
    // The same content again: the same check.
    expect(validators.check({ $id: 'https://example.com/same.json', type: 'object', properties: { n: { type: 'number' } } })).toBe(asNumber);
    const compile = vi.spyOn(Ajv.prototype, 'compile');
    const broken = { type: 'object', properties: { a: { $ref: '#/definitions/nowhere' } } };
    expect(() => validators.check(broken)).toThrow();
    const tries = compile.mock.calls.length;
    expect(() => validators.check(structuredClone(broken))).toThrow();
    expect(compile.mock.calls.length).toBe(tries);
  });
});
