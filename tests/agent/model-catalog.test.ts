import { describe, expect, it } from 'vitest';
import { ModelCatalog, UNKNOWN_MODEL_CONTEXT_TOKENS } from '../../src/agent/models/model-catalog.ts';
import { contextWindowOf } from '../../src/agent/context-budget.ts';

describe('the model table', () => {
  it('knows models by name and by dated snapshot name; the longest known name wins', () => {
    const t = new ModelCatalog();
    expect(t.facts('gpt-4o-mini-2024-07-18')).toMatchObject({ contextTokens: 128_000, inputUsdPerMTok: 0.15 });
    expect(t.facts('gpt-4o-2024-08-06')).toMatchObject({ inputUsdPerMTok: 2.5 });
    expect(t.facts('claude-sonnet-4-5-20250929')).toMatchObject({ contextTokens: 200_000, outputUsdPerMTok: 15 });
    expect(t.facts('models/gemini-2.5-flash')).toMatchObject({ contextTokens: 1_048_576 });
    // A name that only looks like a family is not guessed.
    expect(t.facts('claude-next')).toBeUndefined();
    expect(t.facts('gemini-experimental')).toBeUndefined();
  });

  it("an unknown model without contextTokens gets the stated conservative window; the host's default and the session's own win", () => {
    expect(contextWindowOf({ provider: 'openai-compatible', model: 'my-model' })).toBe(UNKNOWN_MODEL_CONTEXT_TOKENS);
    expect(UNKNOWN_MODEL_CONTEXT_TOKENS).toBe(32_768);
    expect(contextWindowOf({ provider: 'openai-compatible', model: 'my-model' }, { defaultContextTokens: 9000 })).toBe(9000);
    expect(contextWindowOf({ provider: 'openai', model: 'gpt-4o', contextTokens: 5000 })).toBe(5000);
  });

  it("the operator's entries add models and override fields of shipped ones", () => {
    const t = new ModelCatalog({ 'gpt-4o': { inputUsdPerMTok: 1 }, 'house-llm': { contextTokens: 65_536, inputUsdPerMTok: 0.5, outputUsdPerMTok: 1 } });
    expect(t.facts('gpt-4o')).toEqual({ contextTokens: 128_000, inputUsdPerMTok: 1, outputUsdPerMTok: 10 });
    expect(contextWindowOf({ provider: 'openai-compatible', model: 'house-llm' }, { models: t })).toBe(65_536);
    expect(t.costOf('house-llm', { inputTokens: 2_000_000, outputTokens: 1_000_000 })).toBe(2);
    expect(t.costOf('unknown', { inputTokens: 10 })).toBeUndefined();
  });
});
