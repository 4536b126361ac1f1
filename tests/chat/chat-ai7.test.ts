// chat.test.ts again, with ai 7's client side (the `ai-v7` npm alias): every
// import of `ai` in that file's module graph is ai 7 here, so its
// DefaultChatTransport sends the requests and its schema and
// readUIMessageStream take forkline's chunks (docs/api.md, "useChat").
import { expect, it, vi } from 'vitest';
import * as ai from 'ai';

vi.mock('ai', () => import('ai-v7'));

it('runs with ai 7', () => {
  expect(typeof (ai as Record<string, unknown>).isStepCount).toBe('function'); // added in ai 7
});
await import('./chat.test.ts');
