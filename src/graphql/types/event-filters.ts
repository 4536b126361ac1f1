// The origin an events filter names (Session.events(origin:)), onto the store's EventOrigin.
import { builder } from '../builder.ts';
import type { EventOrigin } from '../../store/session-log.ts';

export const EventOriginEnum = builder.enumType('EventOrigin', {
  values: {
    ANY: { description: 'Every event.' },
    INHERITED: { description: "A fork's inherited prefix (Event.inherited)." },
    OWN: { description: 'Events this session wrote itself (not inherited).' },
    SYNTHETIC: { description: 'Written by repair or a fork (Event.synthetic), not by a real actor.' },
  } as const,
});

export const EVENT_ORIGINS: Record<'ANY' | 'INHERITED' | 'OWN' | 'SYNTHETIC', EventOrigin> = {
  ANY: 'any',
  INHERITED: 'inherited',
  OWN: 'own',
  SYNTHETIC: 'synthetic',
};
