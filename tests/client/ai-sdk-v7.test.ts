// The AI SDK adapter with ai 7 and @ai-sdk/openai 4 (the cases:
// ai-sdk-majors.ts). The repository installs them beside ai 6 as npm aliases
// (`ai-v7`, `@ai-sdk/openai-v4`); here every import of `ai` and
// `@ai-sdk/openai` in this file's module graph (the adapter's own sources
// among them) is that real package, as in an app that installed ai 7.
import { vi } from 'vitest';
import { aiSdkMajorCases } from './ai-sdk-majors.ts';

vi.mock('ai', () => import('ai-v7'));
vi.mock('@ai-sdk/openai', () => import('@ai-sdk/openai-v4'));

aiSdkMajorCases(7);
