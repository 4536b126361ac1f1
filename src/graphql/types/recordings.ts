import { GraphQLError } from 'graphql';
import { builder } from '../builder.ts';
import { RESPONSE_TOO_LARGE } from '../../core/errors.ts';
import { recordingText } from '../../store/recordings.ts';
import { MAX_STRING_RECORDING_BYTES } from '../../core/recording.ts';
import { badInput } from '../../core/errors.ts';
import { parseArgs } from '../input.ts';
import { idempotencyKeyArg, idempotencyKeySchema } from './mutations.ts';
import { SessionRef } from './session.ts';
import { scopedReads } from '../scoped-reads.ts';

builder.objectField('Session', 'recording', (t) =>
  t.string({
    description:
      'The session as a recording: JSON Lines, format V4 (a header, then one line per event). One over the response limit is RESPONSE_TOO_LARGE: ' +
      'GET /recordings?session=<id> streams it.',
    resolve: async (session, _args, ctx) => {
      const r = await recordingText(scopedReads(ctx), session, ctx.maxResponseBytes);
      if ('text' in r) return r.text;
      throw new GraphQLError(
        `the recording is more than ${ctx.maxResponseBytes} bytes, the response limit (FORKLINE_MAX_RESPONSE_BYTES): ` +
          `GET /recordings?session=${session.id} streams it`,
        { extensions: { code: RESPONSE_TOO_LARGE } },
      );
    },
  }),
);

builder.mutationField('importRecording', (t) =>
  t.field({
    type: SessionRef,
    description:
      'Imports a recording (format V3 or V4, up to 8 MiB here; larger ones as the body of POST /recordings) as a new session. ' +
      'Nothing is written when any line is invalid; a log ending inside an open turn is repaired with cause `interrupted`.',
    args: { recording: t.arg.string({ required: true }), idempotencyKey: idempotencyKeyArg(t) },
    resolve: async (_root, { recording, idempotencyKey }, ctx) => {
      const bytes = Buffer.byteLength(recording);
      if (bytes > MAX_STRING_RECORDING_BYTES) {
        throw badInput(
          `recordings sent as a GraphQL string are limited to ${MAX_STRING_RECORDING_BYTES} bytes (this one has ${bytes}); ` +
            'send larger ones as the body of POST /recordings, which streams them (npx forkline import does)',
        );
      }
      const key = parseArgs(idempotencyKeySchema, idempotencyKey);
      // The client's going (its connection or WebSocket closed) takes the import out of the queue for a slot, or rolls
      // it back: before, it waited on holding the recording and its tenant's share, then imported for nobody.
      return ctx.services.controller.importRecording(ctx.scope, recording, { key }, { signal: ctx.gone?.signal });
    },
  }),
);
