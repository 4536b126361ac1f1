// The schema worker's pattern engine (src/agent/mcp/pattern-engine.ts) is RE2 in a WebAssembly heap of a fixed
// 16 MiB that never gives back what a compiled pattern took. One caller's few hundred small schemas filled it, and
// from then on every pattern compiled in that worker failed, any tenant's or MCP server's, kept as "not a valid
// schema" (the heap's abort message), until the worker happened to be started again. Now a full heap replaces the
// worker and the request is made again on a fresh one.
import { afterEach, describe, expect, it } from 'vitest';
import { SchemaChecks } from '../../src/agent/mcp/schema-checks.ts';

let checks: SchemaChecks | undefined;
afterEach(async () => {
  await checks?.close();
  checks = undefined;
});

const schemaWith = (pattern: string) => ({ type: 'object', properties: { word: { type: 'string', pattern } }, required: ['word'] });

describe("the schema worker's pattern engine", () => {
  it("filled by one tenant's many patterns is replaced: the next schema, another tenant's or a server's, compiles and checks", async () => {
    const logged: string[] = [];
    // A budget no tenant spends here: what is shown is the heap, not the time.
    checks = new SchemaChecks({ budget: { ms: 600_000, windowMs: 60_000 } }, (m) => logged.push(m));
    // A literal of 20,000 characters (a response schema may hold 32,000) is a few hundred KiB of the engine's heap: about 60 fill it.
    const literal = 'abcdefghij'.repeat(2000);
    for (let i = 0; i < 100; i++) {
      const check = await checks.check('tenant-a', schemaWith(`^${i}-${literal}$`), 'response');
      expect(await check({ word: `${i}-${literal}` }), `pattern ${i}`).toEqual({ valid: true });
    }
    expect(checks.stats.restarts).toBeGreaterThan(0);
    expect(logged.some((m) => /pattern engine's memory is full/.test(m))).toBe(true);

    const theirs = await checks.check('tenant-b', schemaWith('^ok$'), 'response');
    expect(await theirs({ word: 'ok' })).toEqual({ valid: true });
    expect(await theirs({ word: 'no' })).toMatchObject({ valid: false });
    const tool = await checks.check('server', { type: 'object', properties: { path: { type: 'string', pattern: '^/work/' } } });
    expect(await tool({ path: '/work/a' })).toEqual({ valid: true });
    expect(await tool({ path: '/etc/passwd' })).toMatchObject({ valid: false });
  });

  it('is not given a string longer than it can hold: the value is refused with why, and the worker goes on', async () => {
    checks = new SchemaChecks();
    const check = await checks.check('tenant-a', schemaWith('^a+$'), 'response');
    // 4 MiB: more than the engine's heap; the worker's check failed with the engine's abort.
    expect(await check({ word: 'a'.repeat(4 * 1024 * 1024) })).toEqual({
      valid: false,
      errorMessage: 'a string of 4194304 characters is longer than the 262144 a pattern is checked against',
    });
    expect(await check({ word: 'a'.repeat(200_000) })).toEqual({ valid: true });
    expect(checks.stats.restarts).toBe(0);
  });
});
