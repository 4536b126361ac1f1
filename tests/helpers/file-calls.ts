// One completed turn whose write_file call recorded a change set, as the agent
// appends it: for tests and the bench that build file histories without
// running the agent for each call.
import { createHash } from 'node:crypto';
import type { NewEvent } from '../../src/core/events.ts';
import { FILES_CHANGE, type FileChangeRecord } from '../../src/core/file-tree.ts';

export function fileCallEvents(turn: number, changes: FileChangeRecord[], callId = `call_${turn}`): NewEvent[] {
  const inputId = `in_${turn}`;
  return [
    { type: 'inbox/add', data: { inputId, text: 'write' } },
    { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn, inputId } },
    { type: 'step/start', data: { turn, step: 1 } },
    {
      type: 'model/message',
      data: { turn, step: 1, text: '', toolCalls: [{ id: callId, name: 'write_file', arguments: '{}', effect: 'idempotent', files: 'only' }] },
    },
    { type: FILES_CHANGE, data: { callId, changes } },
    { type: 'tool/result', data: { turn, step: 1, callId, resultId: `res_${callId}`, status: 'ok', content: 'wrote', name: 'write_file' } },
    { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn, reason: 'completed' } },
  ];
}

/** About `bytes` of text lines with pseudo-random content (deterministic): big enough, it is stored as chunks. */
export function bigText(bytes: number, seed: string): string {
  const lines: string[] = [];
  for (let i = 0, n = 0; n < bytes; i++) {
    const line = `${i}: ${createHash('sha256').update(`${seed}${i}`).digest('hex')}\n`;
    lines.push(line);
    n += line.length;
  }
  return lines.join('');
}
