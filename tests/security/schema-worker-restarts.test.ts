// The schema worker is stopped, and its compiled schemas lost, whenever a request runs past its time bound, any
// server's or tenant's (src/agent/mcp/schema-checks.ts). A schema compiled before is compiled again when next
// used; that compile was charged to its own server's budget, so one caller's stopped checks spent another's
// budget, and that one's new schemas were refused until the minute ended.
import { afterEach, describe, expect, it } from 'vitest';
import { SchemaChecks } from '../../src/agent/mcp/schema-checks.ts';

let checks: SchemaChecks | undefined;
afterEach(async () => {
  await checks?.close();
  checks = undefined;
});

describe('a schema compiled again after the worker was stopped', () => {
  it("is not charged to its server's budget: another caller's stopped checks do not spend it", async () => {
    // 50 ms of compiles a minute: a fresh worker's first compile (Ajv cold) takes more than 5 ms, a warm one far less.
    checks = new SchemaChecks({ budget: { ms: 50, windowMs: 60_000 }, timeBoundMs: 300 });
    await checks.check('warm-up', { type: 'object' });
    const victim = await checks.check('victim', { type: 'object', properties: { n: { type: 'number' } } });
    // Checks are bounded in time, not budgeted: unique objects are compared pairwise (quadratic), past the bound.
    const costly = await checks.check('other', { type: 'array', uniqueItems: true });
    const items = Array.from({ length: 6000 }, (_, i) => ({ i, pad: 'x'.repeat(20) }));
    for (let round = 0; round < 12; round++) {
      await expect(costly(items)).rejects.toThrow(/took more than 300 ms/);
      // The victim's schema, compiled again on the fresh worker.
      expect(await victim({ n: round })).toEqual({ valid: true });
    }
    expect(checks.stats.restarts).toBeGreaterThanOrEqual(12);
    // A new schema of the victim's is compiled: its budget was not spent by compiling its old one again.
    const fresh = await checks.check('victim', { type: 'object', properties: { s: { type: 'string' } } });
    expect(await fresh({ s: 'ok' })).toEqual({ valid: true });
  });
});
