// The same useChat example built with ai 7 and @ai-sdk/react 4 (the AI SDK's
// next major, installed beside ai 6 as the `ai-v7` and `@ai-sdk/react-v4` npm
// aliases) into dist/ai7/: the browser test drives both builds. Every import of
// `ai` (the page's and @ai-sdk/react's own) is ai 7, so the page holds one copy.
import { mergeConfig } from 'vite';
import base from './vite.config.ts';

export default mergeConfig(base, {
  resolve: {
    alias: [
      { find: /^ai$/, replacement: 'ai-v7' },
      { find: /^@ai-sdk\/react$/, replacement: '@ai-sdk/react-v4' },
    ],
  },
  build: { outDir: 'dist/ai7', emptyOutDir: true },
});
