// An MCP server's result as the log keeps it (docs/mcp.md, core/storable.ts): within its characters a server's
// structured content may hold more distinct keys than an event holds at any door. It is left out (the result
// says it was cut), so the agent's append takes the kept result and the session's recording imports again.
import { describe, expect, it } from 'vitest';
import { screenResult } from '../../src/agent/mcp/mcp-result.ts';
import { MAX_PAYLOAD_KEYS, toStorableJson, unstorableReason } from '../../src/core/storable.ts';

/** `n` distinct keys of three characters or so each: 124,000 fit the kept result's 1,000,000 characters. */
const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [i.toString(36), 0]));

describe('structured content past the distinct keys an event holds', () => {
  it('is left out of the kept result, which any door takes; within the bound it is kept', () => {
    const over = screenResult({ content: [{ type: 'text', text: 'ok' }], structuredContent: keys(MAX_PAYLOAD_KEYS + 1) });
    expect(over.structuredContent).toBeUndefined();
    expect(over.truncated).toBe(true);
    expect(unstorableReason(toStorableJson({ server: 's', tool: 't', result: over }))).toBeUndefined();
    const within = screenResult({ content: [], structuredContent: keys(1000) });
    expect(Object.keys(within.structuredContent!)).toHaveLength(1000);
    expect(within.truncated).toBeUndefined();
  });
});
