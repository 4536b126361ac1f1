// A session far larger than a model's context window, imported through the
// real POST /recordings door from a file written line by line (the test process
// never holds it whole), and a fake OpenAI-compatible model server that keeps
// what each request held. For tests of what one request on such a session makes
// the service hold (docs/operations.md "Memory and time").
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { recordingHeader } from '../../src/core/recording.ts';
import { COMPACTION_HEADER } from '../../src/agent/compaction.ts';

export const MB = 1_000_000;

/**
 * What the recording holds: `turns` turns of one answer each, of `answerChars`
 * characters, the last `hugeTurns` of `hugeChars`; the first of those also
 * calls a tool answered with a result of `hugeChars`, and the first two take
 * an input of `hugeChars` (`answerOf(3000 + turn)`).
 */
export interface HugeSessionShape {
  hugeTurns: number;
  hugeChars: number;
  turns: number;
  answerChars: number;
  model: { provider: string; model: string; contextTokens: number };
}

/** The answer of turn `turn`, recognisable by its start and end. */
export const answerOf = (turn: number, chars: number) => {
  const head = `answer ${turn} begins `;
  const tail = ` answer ${turn} ends`;
  return head + String.fromCharCode(97 + (turn % 26)).repeat(chars - head.length - tail.length) + tail;
};

/** Writes the recording to a temp file; its path, size and event count. */
export async function writeHugeRecording(shape: HugeSessionShape, id: string): Promise<{ file: string; bytes: number; events: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-huge-'));
  const file = path.join(dir, 'huge.jsonl');
  const out = fs.createWriteStream(file);
  const write = (line: unknown) => new Promise<void>((resolve, reject) => out.write(`${JSON.stringify(line)}\n`, (err) => (err ? reject(err) : resolve())));
  await write(recordingHeader({ id, title: 'huge' }));
  let seq = 0;
  const add = (type: string, data: unknown) => write({ seq: seq++, type, data });
  await add('session/model', shape.model);
  for (let turn = 1; turn <= shape.turns; turn++) {
    const firstHuge = shape.turns - shape.hugeTurns + 1;
    const chars = turn >= firstHuge ? shape.hugeChars : shape.answerChars;
    const inputId = `in_${turn}`;
    const hugeInput = turn === firstHuge || turn === firstHuge + 1;
    await add('inbox/add', { inputId, text: hugeInput ? answerOf(3000 + turn, shape.hugeChars) : `question ${turn}` });
    await add('inbox/remove', { inputId, reason: 'taken' });
    await add('turn/start', { turn, inputId });
    await add('step/start', { turn, step: 1 });
    let step = 1;
    if (turn === firstHuge) {
      await add('model/message', { turn, step, text: '', toolCalls: [{ id: 'call_big', name: 'clock', arguments: '{}' }] });
      await add('tool/result', { turn, step, callId: 'call_big', resultId: 'res_big', status: 'ok', content: answerOf(1000, shape.hugeChars), name: 'clock' });
      await add('step/end', { turn, step, reason: 'completed' });
      step = 2;
      await add('step/start', { turn, step });
    }
    await add('model/message', { turn, step, text: answerOf(turn, chars), toolCalls: [] });
    await add('step/end', { turn, step, reason: 'completed' });
    await add('turn/end', { turn, reason: 'completed' });
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return { file, bytes: fs.statSync(file).size, events: seq };
}

/** POSTs a recording file to /recordings as a stream; the imported session's id. */
export async function importRecording(base: string, file: string): Promise<string> {
  const res = await fetch(`${base}/recordings`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: Readable.toWeb(fs.createReadStream(file)) as never,
    duplex: 'half',
  } as RequestInit);
  const body = (await res.json()) as any;
  if (res.status !== 201) throw new Error(`import failed: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
  return body.session.id;
}

/** What the fake model received: each request's body size and messages (role, text). */
export interface ReceivedRequest {
  bytes: number;
  messages: Array<{ role: string; text: string }>;
  compaction: boolean;
}

/** A fake OpenAI-compatible chat completions server: answers a summary request with a short summary, any other with `answer to: <last text's first 40 characters>`. */
export async function fakeModelServer(): Promise<{ baseUrl: string; received: ReceivedRequest[]; close(): Promise<void> }> {
  const received: ReceivedRequest[] = [];
  const sse = (d: unknown) => `data: ${typeof d === 'string' ? d : JSON.stringify(d)}\n\n`;
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const body = JSON.parse(raw.toString('utf8'));
    const messages = (body.messages as any[]).map((m) => ({
      role: m.role,
      text: typeof m.content === 'string' ? m.content : (m.content ?? []).map((p: any) => p.text ?? '').join(''),
    }));
    const last = messages.at(-1)!.text;
    const compaction = last.startsWith(COMPACTION_HEADER);
    received.push({ bytes: raw.length, messages, compaction });
    const text = compaction ? `summary ${received.length}` : `answer to: ${last.slice(0, 40)}`;
    const chunk = (delta: unknown, finish: string | null = null) =>
      sse({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish }] });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end([chunk({ role: 'assistant', content: '' }), chunk({ content: text }), chunk({}, 'stop'), sse('[DONE]')].join(''));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    received,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
