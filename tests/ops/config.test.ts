import { describe, expect, it } from 'vitest';
import { defaultModelOf, loadConfig, providersOf, securityOptions } from '../../src/config.ts';

describe('configuration (docs/operations.md)', () => {
  it('defaults: port 4000 on loopback, embedded database, keyless scripted model', () => {
    const c = loadConfig({});
    expect([c.PORT, c.HOST, c.DATABASE_URL, c.FORKLINE_DATA_DIR, c.MODEL_PROVIDER]).toEqual([4000, '127.0.0.1', undefined, '.data', 'scripted']);
    expect(defaultModelOf(c)).toEqual({ provider: 'scripted', model: 'scripted' });
  });

  it('an OpenAI-compatible provider needs a model name', () => {
    expect(() => loadConfig({ MODEL_PROVIDER: 'openai' })).toThrow(/MODEL: MODEL_PROVIDER=openai needs MODEL/);
    const c = loadConfig({ MODEL_PROVIDER: 'openai', MODEL: 'llama3', OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1' });
    expect(defaultModelOf(c)).toEqual({ provider: 'openai', model: 'llama3' });
  });

  it('every provider but the scripted one needs a model name; an OpenAI-compatible server needs its base URL; keys and base URLs per provider', () => {
    expect(() => loadConfig({ MODEL_PROVIDER: 'anthropic' })).toThrow(/MODEL: MODEL_PROVIDER=anthropic needs MODEL/);
    expect(() => loadConfig({ MODEL_PROVIDER: 'openai-compatible', MODEL: 'llama3' })).toThrow(/OPENAI_COMPATIBLE_BASE_URL/);
    const c = loadConfig({
      MODEL_PROVIDER: 'openai-compatible',
      MODEL: 'llama3',
      OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:11434/v1',
      ANTHROPIC_API_KEY: 'sk-ant',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/v1',
      GOOGLE_GENERATIVE_AI_API_KEY: 'g-key',
      FORKLINE_MODEL_IDLE_TIMEOUT_MS: '60000',
      FORKLINE_MODEL_MAX_TOOL_CALLS: '32',
    });
    expect(defaultModelOf(c)).toEqual({ provider: 'openai-compatible', model: 'llama3' });
    expect(providersOf(c)).toEqual({
      openai: { baseUrl: 'https://api.openai.com/v1', apiKey: undefined },
      anthropic: { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-ant' },
      google: { baseUrl: undefined, apiKey: 'g-key' },
      openaiCompatible: { baseUrl: 'http://127.0.0.1:11434/v1', apiKey: undefined },
      limits: { maxResponseBytes: 32 * 1024 * 1024, idleTimeoutMs: 60_000, callTimeoutMs: 15 * 60_000, maxToolCalls: 32 },
    });
    expect(providersOf(loadConfig({}))).not.toHaveProperty('openaiCompatible');
  });

  it('rejects bad values with the variable named', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ DATABASE_URL: 'not a url' })).toThrow(/DATABASE_URL/);
    expect(() => loadConfig({ MODEL_PROVIDER: 'gpt' })).toThrow(/MODEL_PROVIDER/);
    expect(() => loadConfig({ FORKLINE_MODEL_MAX_RESPONSE_BYTES: '100' })).toThrow(/FORKLINE_MODEL_MAX_RESPONSE_BYTES/);
    expect(() => loadConfig({ FORKLINE_STATEMENT_BOUNDS: 'yes' })).toThrow(/FORKLINE_STATEMENT_BOUNDS/);
    expect(() => loadConfig({ FORKLINE_MODEL_MAX_TOOL_CALLS: '0' })).toThrow(/FORKLINE_MODEL_MAX_TOOL_CALLS/);
    expect(() => loadConfig({ FORKLINE_MODEL_CALL_TIMEOUT_MS: '10' })).toThrow(/FORKLINE_MODEL_CALL_TIMEOUT_MS/);
  });

  it('statement bounds are on by default with the three timeouts, and off with FORKLINE_STATEMENT_BOUNDS=off', () => {
    const on = securityOptions(loadConfig({ FORKLINE_QUERY_TIMEOUT_MS: '2000' }));
    expect(on.statementBounds).toBe(true);
    expect(on.statementTimeouts).toEqual({ queryMs: 2000, mutationMs: 60_000, longStatementMs: 600_000 });
    expect(securityOptions(loadConfig({ FORKLINE_STATEMENT_BOUNDS: 'off' })).statementBounds).toBe(false);
  });
});
