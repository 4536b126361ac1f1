// The AI SDK adapter with ai 7 and @ai-sdk/openai 4, as in an app that
// upgraded: the repository installs them beside ai 6 as npm aliases (`ai-v7`,
// `@ai-sdk/openai-v4`), and here every import of `ai` and `@ai-sdk/openai` in
// this file's module graph (the adapter's own sources among them) is that real
// package. The cases: ai-sdk-majors.ts, and the adapter tests written for ai 6
// (runner-adapter-edges.test.ts: every call in the log before its tool runs,
// none run when its append fails; runner-adapter-approvals.test.ts;
// runner-sdk-compaction.test.ts, with ai 7's own mock model;
// runner-call-first.test.ts: each tool reads the log as it starts;
// runner-ai-sdk-call-ids.test.ts: a turn's call ids by forkline's rules;
// runner-adapter-cancel.test.ts: a turn the app cancels), whose
// OpenAI Agents cases run here again unchanged.
import { vi } from 'vitest';
import { aiSdkMajorCases } from './ai-sdk-majors.ts';

vi.mock('ai', () => import('ai-v7'));
vi.mock('ai/test', () => import('ai-v7/test'));
vi.mock('@ai-sdk/openai', () => import('@ai-sdk/openai-v4'));

aiSdkMajorCases(7);
await import('./runner-adapter-edges.test.ts');
await import('./runner-adapter-approvals.test.ts');
await import('./runner-sdk-compaction.test.ts');
await import('./runner-call-first.test.ts');
await import('./runner-ai-sdk-call-ids.test.ts');
await import('./runner-adapter-cancel.test.ts');
