// Inside this repository the @forkline/* packages are used from their sources
// (no build needed for tests, the CLI or the dashboard): Vite and Vitest alias
// each name to its entry module, as tsconfig.json's `paths` do for tsc and tsx.
// Installed elsewhere, a package resolves to its built dist/ (package.json exports).
import { fileURLToPath } from 'node:url';

const entry = (dir: string, file: string) => fileURLToPath(new URL(`./${dir}/src/${file}.ts`, import.meta.url));

export const sourceAliases = [
  { find: /^@forkline\/client$/, replacement: entry('client', 'client') },
  { find: /^@forkline\/runner$/, replacement: entry('runner', 'runner') },
  { find: /^@forkline\/ai-sdk$/, replacement: entry('ai-sdk', 'ai-sdk') },
  { find: /^@forkline\/openai-agents$/, replacement: entry('openai-agents', 'openai-agents') },
];
