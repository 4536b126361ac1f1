// The `models` query: the model providers this host knows (agent/models/registry.ts)
// and the model new sessions get, for pickers such as the dashboard's "New session".
import { builder } from '../builder.ts';
import type { ModelOffer } from '../../agent/models/registry.ts';

const ModelProviderRef = builder.objectRef<ModelOffer & { isDefault: boolean }>('ModelProvider').implement({
  description: 'A model provider the host can run (ModelConfigInput.provider).',
  fields: (t) => ({
    name: t.exposeString('provider'),
    models: t.exposeStringList('models', {
      description: 'Model names the host knows for it; empty when any name its server accepts will do (free text).',
    }),
    isDefault: t.exposeBoolean('isDefault', { description: "The provider of the host's default model." }),
  }),
});

const ModelCatalogRef = builder
  .objectRef<{ providers: (ModelOffer & { isDefault: boolean })[]; defaultProvider: string; defaultModel: string }>('ModelCatalog')
  .implement({
    fields: (t) => ({
      providers: t.field({ type: [ModelProviderRef], resolve: (c) => c.providers }),
      defaultProvider: t.exposeString('defaultProvider', { description: 'The provider a session without a session/model event uses.' }),
      defaultModel: t.exposeString('defaultModel', { description: 'The model a session without a session/model event uses.' }),
    }),
  });

builder.queryFields((t) => ({
  models: t.field({
    type: ModelCatalogRef,
    description: 'The model providers this host knows and its default model (no secrets: names only).',
    resolve: (_root, _args, ctx) => {
      const { defaultModel } = ctx.services.models;
      return {
        providers: ctx.services.models.offers().map((o) => ({ ...o, isDefault: o.provider === defaultModel.provider })),
        defaultProvider: defaultModel.provider,
        defaultModel: defaultModel.model,
      };
    },
  }),
}));
