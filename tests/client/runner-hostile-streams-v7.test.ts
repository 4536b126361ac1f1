// runner-hostile-streams.test.ts with ai 7 and @ai-sdk/openai 4 (the npm aliases `ai-v7`, `@ai-sdk/openai-v4`, as
// ai-sdk-v7.test.ts uses them): every import of `ai` and `@ai-sdk/openai` in this file's module graph is that package.
import { vi } from 'vitest';

vi.mock('ai', () => import('ai-v7'));
vi.mock('ai/test', () => import('ai-v7/test'));
vi.mock('@ai-sdk/openai', () => import('@ai-sdk/openai-v4'));

await import('./runner-hostile-streams.test.ts');
