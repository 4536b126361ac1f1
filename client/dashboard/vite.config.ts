// Builds the dashboard (client/dashboard) into client/dashboard/dist, which
// src/dashboard-static.ts serves at `/` (`npm run build` runs this).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { sourceAliases } from '../../packages/source-aliases.ts';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  resolve: { alias: sourceAliases },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true, target: 'es2022' },
  // /healthz too: a page that lost its connection resubscribes when it answers (api.ts).
  server: { proxy: { '/graphql': { target: 'http://127.0.0.1:4000', ws: true }, '/healthz': 'http://127.0.0.1:4000' } },
});
