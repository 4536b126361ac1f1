// API tokens as data: a tenant's admin creates, lists and revokes
// the tenant's tokens; one call each onto host/api-tokens.ts, which checks the
// admin scope. Secrets are answered once, by createApiToken.
import { z } from 'zod';
import { builder } from '../builder.ts';
import { parseArgs } from '../input.ts';
import { isLive, TOKEN_SCOPES } from '../../core/api-tokens.ts';
import { MAX_LISTED_TOKENS } from '../../host/api-tokens.ts';
import type { ApiTokenRow } from '../../store/api-tokens.ts';

const ApiTokenScopeEnum = builder.enumType('ApiTokenScope', {
  values: {
    READ: { value: 'read', description: 'Queries and subscriptions.' },
    WRITE: { value: 'write', description: 'Also mutations, AG-UI runs and recording uploads.' },
    ADMIN: { value: 'admin', description: "Also managing the tenant's API tokens." },
  } as const,
});

const ApiTokenStatusEnum = builder.enumType('ApiTokenStatus', { values: ['ACTIVE', 'EXPIRED', 'REVOKED'] as const });

const ApiTokenRef = builder.objectRef<ApiTokenRow>('ApiToken').implement({
  description: "An API token of the caller's tenant. Its secret is never shown again after createApiToken; the service keeps only its digest.",
  fields: (t) => ({
    id: t.exposeID('id', { description: 'What revokeApiToken takes.' }),
    name: t.exposeString('name'),
    scopes: t.field({
      type: [ApiTokenScopeEnum],
      description: 'What it may do; each scope includes the ones before it (read < write < admin).',
      resolve: (k) => k.scopes,
    }),
    status: t.field({
      type: ApiTokenStatusEnum,
      resolve: (k) => (k.revokedAt ? 'REVOKED' : isLive(k, new Date()) ? 'ACTIVE' : 'EXPIRED'),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', nullable: true, description: 'Null: it does not expire.' }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true, description: 'When a request last used it (recorded at most once a minute).' }),
  }),
});

const CreateApiTokenInput = builder.inputType('CreateApiTokenInput', {
  fields: (t) => ({
    name: t.string({ required: true, description: 'What it is for (1-100 characters), shown by apiTokens.' }),
    scopes: t.field({ type: [ApiTokenScopeEnum], required: true }),
    expiresAt: t.field({ type: 'DateTime', description: 'When it stops working (in the future). Omitted: when it is revoked.' }),
  }),
});

const CreateApiTokenPayload = builder.objectRef<{ token: ApiTokenRow; secret: string }>('CreateApiTokenPayload').implement({
  fields: (t) => ({
    token: t.field({ type: ApiTokenRef, resolve: (p) => p.token }),
    secret: t.exposeString('secret', {
      description: 'The token itself (send it as `Authorization: Bearer <secret>`). Shown only here: the service stores its digest.',
    }),
  }),
});

const createArgs = z.object({
  name: z.string().trim().min(1).max(100),
  scopes: z.array(z.enum(TOKEN_SCOPES)).min(1).max(TOKEN_SCOPES.length),
  expiresAt: z.date().nullish(),
});

builder.queryFields((t) => ({
  apiTokens: t.field({
    type: [ApiTokenRef],
    description: `The tenant's API tokens, newest first (at most ${MAX_LISTED_TOKENS}), revoked and expired ones included. Needs the admin scope.`,
    resolve: (_root, _args, ctx) => ctx.services.apiTokens.list(ctx.caller),
  }),
}));

builder.mutationFields((t) => ({
  createApiToken: t.field({
    type: CreateApiTokenPayload,
    description:
      "A new API token of the caller's tenant; its secret is in the answer, once. Needs the admin scope. A tenant holds at most " +
      'FORKLINE_MAX_API_TOKENS_PER_TENANT live tokens (neither revoked nor expired; default 100): past it, BAD_USER_INPUT with extensions.limit.',
    args: { input: t.arg({ type: CreateApiTokenInput, required: true }) },
    resolve: (_root, { input }, ctx) => {
      const { name, scopes, expiresAt } = parseArgs(createArgs, input);
      return ctx.services.apiTokens.create(ctx.caller, { name, scopes, expiresAt: expiresAt ?? null });
    },
  }),
  revokeApiToken: t.field({
    type: ApiTokenRef,
    description:
      "Revokes a token of the caller's tenant: its next request is refused (401), and its WebSockets and streams close, within seconds " +
      'on every process. Revoking twice keeps the first revokedAt. Needs the admin scope.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.apiTokens.revoke(ctx.caller, parseArgs(z.string().min(1).max(200), id)),
  }),
}));
