// Typed client: TypedDocumentNodes for client/operations/*.graphql, generated
// from the committed SDL (schema/schema.graphql) by `npm run build` — into the
// @forkline/client package (packages/client) and into client/generated/ for the
// dashboard, which imports the documents it needs by path.
import type { CodegenConfig } from '@graphql-codegen/cli';

const output = {
  preset: 'client',
  presetConfig: { fragmentMasking: false },
  config: {
    useTypeImports: true,
    enumsAsTypes: true,
    scalars: { DateTime: 'string', JSON: 'unknown', SafeInt: 'number', ID: 'string' },
  },
} as const;

const config: CodegenConfig = {
  schema: 'schema/schema.graphql',
  documents: ['client/operations/*.graphql'],
  ignoreNoDocuments: false,
  silent: true,
  generates: {
    // Built to JavaScript for Node's ESM resolution: relative imports end in .js.
    'packages/client/src/generated/': { ...output, config: { ...output.config, emitLegacyCommonJSImports: false } },
    'client/generated/': output,
  },
};

export default config;
