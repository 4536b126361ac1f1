// WebSocket messages under the UTF-8 rule of every door (core/input-rules.ts).
// graphql-ws reads a binary message as String(buffer), which turns an invalid
// byte into U+FFFD, and ws's own check of text messages closes with 1007 and no
// reason. So ws's check is off (skipUTF8Validation) and every message, text or
// binary, is checked here before any listener sees it: one that is not UTF-8
// closes the socket with 1007 (invalid payload data) and a reason saying why.
import { WebSocket } from 'ws';
import { decodeUtf8, INVALID_UTF8 } from '../core/input-rules.ts';

/** Close code for a message whose data does not match its type (RFC 6455 §7.4.1). */
export const INVALID_PAYLOAD = 1007;

export class Utf8CheckedWebSocket extends WebSocket {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- EventEmitter's own signature
  override emit(event: string | symbol, ...args: any[]): boolean {
    if (event === 'message' && Buffer.isBuffer(args[0]) && decodeUtf8(args[0]) === undefined) {
      this.close(INVALID_PAYLOAD, `a message ${INVALID_UTF8}`.slice(0, 123));
      return false;
    }
    return super.emit(event, ...args);
  }
}
