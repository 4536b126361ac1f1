// WebSocket messages under the UTF-8 rule of every door (core/input-rules.ts).
// graphql-ws reads a binary message as String(buffer), which turns an invalid
// byte into U+FFFD, and ws's own check of text messages closes with 1007 and no
// reason. So ws's check is off (skipUTF8Validation) and every message, text or
// binary, is checked here before any listener sees it: one that is not UTF-8
// closes the socket with 1007 (invalid payload data) and a reason saying why.
// A frame ws itself refuses (over maxPayload, a bad opcode, an unmasked frame)
// is the client's error too: ws closes the socket with its code (1009, 1002)
// and the error goes no further, where graphql-ws would print it to stderr as
// an internal error — a line per hostile connection. A message's JSON is held
// to the bounds of every door's text (core/storable.ts) before graphql-ws
// parses it: one nested too deep closes the socket with 4400, as graphql-ws
// closes it for a message it cannot read.
import { WebSocket } from 'ws';
import { CloseCode } from 'graphql-ws';
import { decodeUtf8, INVALID_UTF8 } from '../core/input-rules.ts';
import { jsonTextRefusal } from '../core/storable.ts';

/** Close code for a message whose data does not match its type (RFC 6455 §7.4.1). */
export const INVALID_PAYLOAD = 1007;

export class Utf8CheckedWebSocket extends WebSocket {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- EventEmitter's own signature
  override emit(event: string | symbol, ...args: any[]): boolean {
    if (event === 'message' && Buffer.isBuffer(args[0])) {
      if (decodeUtf8(args[0]) === undefined) {
        this.close(INVALID_PAYLOAD, `a message ${INVALID_UTF8}`.slice(0, 123));
        return false;
      }
      const refused = jsonTextRefusal(args[0]);
      if (refused) {
        this.close(CloseCode.BadRequest, `a message ${refused.reason}`.slice(0, 123));
        return false;
      }
    }
    if (event === 'error' && isClientFrameError(args[0])) return false;
    return super.emit(event, ...args);
  }
}

/** ws's refusal of a frame the client sent (its receiver's errors carry a WS_ERR_ code); ws has closed the socket for it. */
function isClientFrameError(err: unknown): boolean {
  const code = err instanceof Error ? (err as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('WS_ERR_');
}
