// What one event of a door's own stream may be (/chat's UI message chunks,
// /agui's AG-UI events): the ceiling each GraphQL subscription event is held
// to, FORKLINE_MAX_RESPONSE_BYTES (docs/operations.md "Limits"), so what a
// model, a tool or a recording put in one event cannot make the process hold
// more for a client than a subscription can. A stream whose next event is over
// it ends with this error, told to its client: no event is left out silently.
import { RESPONSE_TOO_LARGE } from '../core/errors.ts';

export class EventTooLarge extends Error {
  readonly code = RESPONSE_TOO_LARGE;
  constructor(bytes: number, maxBytes: number) {
    super(
      `the stream's next event would be ${bytes} bytes, over the limit of ${maxBytes} (FORKLINE_MAX_RESPONSE_BYTES): ` +
        'the stream ends here; the session holds the whole answer',
    );
    this.name = 'EventTooLarge';
  }
}

/** Throws EventTooLarge when an event of `bytes` is over `maxBytes`. */
export function checkEventBytes(bytes: number, maxBytes: number): void {
  if (bytes > maxBytes) throw new EventTooLarge(bytes, maxBytes);
}
