// Builds the useChat example (docs/api.md, "useChat") into dist/; the browser
// test builds it and serves it beside a forkline service.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: './',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 1024,
    // swr (under @ai-sdk/react) marks its modules 'use client', which means nothing in a plain bundle.
    rolldownOptions: { onwarn: (warning, warn) => warning.code !== 'MODULE_LEVEL_DIRECTIVE' && warn(warning) },
  },
  // `vite` here: the page at :5173 talks to a forkline at :4000 through this proxy.
  server: { proxy: { '/chat': 'http://127.0.0.1:4000' } },
});
