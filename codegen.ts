// Typed client: TypedDocumentNodes for client/operations/*.graphql, generated
// from the committed SDL (schema/schema.graphql) by `npm run build`.
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  schema: 'schema/schema.graphql',
  documents: ['client/operations/*.graphql'],
  ignoreNoDocuments: false,
  silent: true,
  generates: {
    'client/generated/': {
      preset: 'client',
      presetConfig: { fragmentMasking: false },
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        scalars: { DateTime: 'string', JSON: 'unknown', ID: 'string' },
      },
    },
  },
};

export default config;
