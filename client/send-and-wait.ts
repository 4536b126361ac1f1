// `forkline send --wait`: send a message, print the answer as it streams,
// return when its turn ends.
import { SendMessageDocument, SessionEventsLiveDocument, SessionTurnsDocument, type ForklineClient } from '@forkline/client';
import { printJson, printText } from './terminal-output.ts';

/**
 * Sends the message, then prints the model text of the turn that takes it as
 * it streams. The log decides which turn that is, its text and when it ends;
 * the streamed deltas are best effort (a turn that starts before the
 * subscription is registered streams nothing), and whatever they did not
 * deliver is completed from the persisted model messages. No sleeps, no polls.
 * Returns the turn's end reason.
 */
export async function sendAndWait(client: ForklineClient, sessionId: string, text: string, json: boolean): Promise<string> {
  // eslint-disable-next-line prefer-const -- read by the subscription's callbacks before sendMessage answers
  let inputId: string | undefined;
  let streamedTurn: number | undefined;
  let printed = '';
  const print = (t: string) => {
    printed += t;
    if (!json) printText(t);
  };
  // Updates that arrive before sendMessage has answered wait for its inputId.
  const early: Array<{ kind: string; turn: number; inputId?: string | null; text?: string | null }> = [];
  const onUpdate = (u: (typeof early)[number]) => {
    if (u.kind === 'TURN_STARTED' && u.inputId === inputId) streamedTurn = u.turn;
    else if (u.kind === 'TEXT_DELTA' && u.turn === streamedTurn && u.text) print(u.text);
  };
  const turns = client.subscribe(SessionTurnsDocument, { sessionId });
  const streaming = (async () => {
    for await (const { sessionTurns: u } of turns) {
      if (inputId === undefined) early.push(u);
      else onUpdate(u);
    }
  })().catch(() => {}); // best effort: the log below is authoritative

  const { sendMessage } = await client.mutate(SendMessageDocument, { input: { sessionId, text } });
  inputId = sendMessage.inputId;
  for (const u of early.splice(0)) onUpdate(u);
  if (json) printJson({ inputId, seq: sendMessage.event.seq });

  const { turn, reason, text: full } = await turnOf(client, sessionId, inputId, sendMessage.event.seq);
  await turns.return?.(undefined);
  await streaming;
  // The log has the whole text: print what the stream did not.
  if (full.startsWith(printed)) print(full.slice(printed.length));
  if (json) printJson({ turn, reason, text: full });
  else {
    if (printed && !printed.endsWith('\n')) process.stdout.write('\n');
    process.stderr.write(`[turn ${turn ?? '?'} ${reason}]\n`);
  }
  return reason;
}

/**
 * Waits for the turn that takes `inputId` to end, reading the session's log
 * from `afterSeq` on the event subscription (catch-up, then live): its number,
 * end reason (`cancelled` when the input left the inbox untaken) and the text
 * of its model messages. No sleeps, no polls.
 */
export async function turnOf(
  client: ForklineClient,
  sessionId: string,
  inputId: string,
  afterSeq: number,
): Promise<{ turn: number | undefined; reason: string; text: string }> {
  let turn: number | undefined;
  const texts: string[] = [];
  let reason = 'unknown';
  for await (const { sessionEvents: e } of client.subscribe(SessionEventsLiveDocument, { sessionId, afterSeq })) {
    const data = e.data as { turn?: number; inputId?: string; text?: string; reason?: string };
    if (e.type === 'turn/start' && data.inputId === inputId) {
      turn = data.turn!;
    } else if (turn !== undefined && data.turn === turn && e.type === 'model/message' && data.text) {
      texts.push(data.text);
    } else if (turn !== undefined && data.turn === turn && e.type === 'turn/end') {
      reason = data.reason!;
      break;
    } else if (e.type === 'inbox/remove' && data.inputId === inputId && data.reason === 'cancelled') {
      reason = 'cancelled';
      break;
    }
  }
  return { turn, reason, text: texts.join('') };
}
