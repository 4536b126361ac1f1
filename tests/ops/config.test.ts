import { describe, expect, it } from 'vitest';
import { defaultModelOf, loadConfig } from '../../src/config.ts';

describe('configuration (DESIGN §8)', () => {
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

  it('rejects bad values with the variable named', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ DATABASE_URL: 'not a url' })).toThrow(/DATABASE_URL/);
    expect(() => loadConfig({ MODEL_PROVIDER: 'gpt' })).toThrow(/MODEL_PROVIDER/);
  });
});
