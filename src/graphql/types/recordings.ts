import { builder } from '../builder.ts';
import { exportRecordingText, importRecording } from '../../store/recordings.ts';

builder.prismaObjectField('Session', 'recording', (t) =>
  t.string({
    description: 'The session as a recording: JSON Lines, format V4 (a header, then one line per event).',
    resolve: (session, _args, ctx) => exportRecordingText(ctx.store, ctx.scope, session.id),
  }),
);

builder.mutationField('importRecording', (t) =>
  t.prismaField({
    type: 'Session',
    description:
      'Imports a recording (format V3 or V4) as a new session. Nothing is written when any line is invalid; ' +
      'a log ending inside an open turn is repaired with cause `interrupted`.',
    args: { recording: t.arg.string({ required: true }) },
    resolve: async (query, _root, { recording }, ctx) => {
      const session = await importRecording(ctx.store, ctx.scope, recording);
      return ctx.prisma.session.findUniqueOrThrow({ ...query, where: { id: session.id } });
    },
  }),
);
