import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ForklineError } from '../../src/core/errors.ts';
import { decodeEvent } from '../../src/core/events.ts';
import { MAX_PENDING_INPUTS } from '../../src/core/log-state.ts';
import {
  MAX_RECORDING_BYTES,
  RecordingValidator,
  exportLines,
  recordingHeader,
  recordingLine,
  recordingLines,
  upgradeToV4,
  type RecordingEvent,
} from '../../src/core/recording.ts';
import { FIXTURES, MALFORMED, notStartedLog, readFixture } from '../fixtures/recordings/recordings.ts';
import { anyData } from '../helpers/event-data.ts';

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of items) out.push(x);
  return out;
}

async function validate(source: string | Iterable<string>) {
  const v = new RecordingValidator();
  const events: RecordingEvent[] = [];
  for await (const line of recordingLines(source)) {
    const e = v.push(line);
    if (e) events.push(e);
  }
  return { events, summary: v.finish() };
}

async function rejection(source: string): Promise<ForklineError> {
  const err = await validate(source).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ForklineError);
  return err as ForklineError;
}

describe('recording fixtures', () => {
  it.each(FIXTURES)('%s is valid under the version of its header', async (name) => {
    const { events, summary } = await validate(readFixture(name));
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    expect(summary.eventCount).toBe(events.length);
  });

  it('summarises completed, crashed and forked logs', async () => {
    const completed = (await validate(readFixture('v3-completed.jsonl'))).summary;
    expect(completed).toMatchObject({ eventCount: 28, turnCount: 2, openTurn: false, pendingInputs: 0, lastTitle: 'Clock and notes' });
    expect(completed.fork).toBeUndefined();
    expect((await validate(readFixture('v3-crashed.jsonl'))).summary).toMatchObject({ turnCount: 2, openTurn: true, pendingInputs: 1 });
    // child: 7 inherited events, marker at 7, three closers: first live seq 11
    expect((await validate(readFixture('v4-forked-child.jsonl'))).summary.fork).toEqual({ forkedAtSeq: 6, inheritedEventCount: 7, firstLiveSeq: 11 });
    // nested: the ancestor marker (seq 7) is inherited; its own marker is the last one
    const nested = await validate(readFixture('v4-nested-fork.jsonl'));
    expect(nested.events.filter((e) => e.type === 'session/end-seed').map((e) => [e.seq, e.inherited])).toEqual([
      [7, true],
      [18, false],
    ]);
    expect(nested.summary.fork).toEqual({ forkedAtSeq: 17, inheritedEventCount: 18, firstLiveSeq: 22 });
  });
});

describe('format versions', () => {
  it('V4 hands back a not-started result with its original id and wording', async () => {
    const { events } = await validate(readFixture('v4-forked-child.jsonl'));
    const result = events.find((e) => e.type === 'tool/result' && e.synthetic)!;
    expect(result.data).toMatchObject({ status: 'not-started', resultId: 'forked:ses_fixturev4tools@6:call_v4t_1' });
    expect(anyData(result).content).toMatch(/forked at event 6 of session ses_fixturev4tools/);
    expect(events.filter((e) => e.type.endsWith('/end') && e.synthetic).map((e) => anyData(e).reason)).toEqual(['forked', 'forked']);
  });

  it('a not-started result is rejected as V3 and the same log accepted as V4', async () => {
    expect((await rejection(notStartedLog(3))).message).toMatch(/^line 18: codec: invalid tool\/result event: data\.status/);
    const { summary } = await validate(notStartedLog(4));
    expect(summary.openTurn).toBe(false);
  });

  it('V3 rejects forked reasons and markers; V3 logs stay valid under V3 unchanged', async () => {
    expect(() => decodeEvent('step/end', { turn: 1, step: 1, reason: 'forked' }, 3)).toThrow(/data\.reason/);
    expect(() => decodeEvent('session/end-seed', { parentSessionId: 's', cutSeq: 0, inheritedEventCount: 1 }, 3)).toThrow(/unknown event type/);
    const { events } = await validate(readFixture('v3-completed.jsonl'));
    for (const e of events) {
      // V4 is a superset: every V3 event decodes to the same data, and the upgrade keeps it.
      expect(decodeEvent(e.type, e.data, 4)).toEqual(e.data);
      expect(upgradeToV4(e)).toEqual(e);
    }
  });
});

describe('malformed recordings', () => {
  it.each(MALFORMED)('$name: rejected naming line $line and rule "$rule"', async ({ text, line, rule }) => {
    const err = await rejection(text);
    expect(err.code).toBe('BAD_USER_INPUT');
    expect(err.message.startsWith(`line ${line}: ${rule}: `)).toBe(true);
    expect(err.details).toEqual({ line, rule });
  });

  it('names the field of a wrong type', async () => {
    const wrong = MALFORMED.find((m) => m.name === 'wrong field type')!;
    expect((await rejection(wrong.text)).message).toContain('data.turn');
  });
});

describe('what a recording may claim (tests/security/door-agreement.test.ts found each)', () => {
  const header = (runner?: string) => JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_x', ...(runner ? { runner } : {}) } });
  const lines = (head: string, events: unknown[]) => [head, ...events.map((e, seq) => JSON.stringify({ seq, ...(e as object) }))].join('\n');
  const call = { id: 'c1', name: 'send', arguments: '{}' };
  const turn = [
    { type: 'inbox/add', data: { inputId: 'i1', text: 'go' } },
    { type: 'inbox/remove', data: { inputId: 'i1', reason: 'taken' } },
    { type: 'turn/start', data: { turn: 1, inputId: 'i1' } },
    { type: 'step/start', data: { turn: 1, step: 1 } },
  ];
  const declared = (effect: string) => ({ type: 'session/runner-tools', data: { tools: [{ name: 'send', effect }] } });
  const message = (c: object) => ({ type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [c] } });

  it("a runner session's call keeps its runner's declared effect, as its append records it", async () => {
    const err = await rejection(lines(header('pool'), [declared('side-effects'), ...turn, message({ ...call, effect: 'read-only' })]));
    expect(err.details).toEqual({ line: 7, rule: 'call effect' });
    const { events } = await validate(lines(header('pool'), [declared('side-effects'), ...turn, message(call)]));
    expect(anyData(events.at(-1)!).toolCalls).toEqual([{ ...call, effect: 'side-effects' }]);
    // Forkline's own sessions have no declared set to keep.
    await validate(lines(header(), [declared('side-effects'), ...turn, message({ ...call, effect: 'read-only' })]));
  });

  it.each(['0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999-01:00'])(
    'a time outside the years 0001-9999 (%s) is refused naming its line',
    async (createdAt) => {
      const err = await rejection(lines(header(), [{ type: 'session/title', data: { title: 't' }, createdAt }]));
      expect(err.details).toEqual({ line: 2, rule: 'event shape' });
    },
  );

  it('a time with any offset is kept in UTC (Postgres refuses offsets past ±15:59)', async () => {
    const title = { type: 'session/title', data: { title: 't' } };
    const { events } = await validate(
      lines(header(), [
        { ...title, createdAt: '2026-01-01T00:00:00+15:30' },
        { ...title, createdAt: '2026-01-01T00:00:00-23:59' },
      ]),
    );
    expect(events.map((e) => e.createdAt)).toEqual(['2025-12-31T08:30:00.000Z', '2026-01-01T23:59:00.000Z']);
  });
});

describe("a recording's waiting inputs", () => {
  const header = JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_x' } });
  const add = (seq: number, inputId = `in_${seq}`) => JSON.stringify({ seq, type: 'inbox/add', data: { inputId, text: 'go' } });

  it('are at most MAX_PENDING_INPUTS at once: one more is refused naming its line; one taken makes room', async () => {
    const adds = Array.from({ length: MAX_PENDING_INPUTS }, (_, seq) => add(seq));
    expect((await validate([header, ...adds].join('\n'))).summary.pendingInputs).toBe(MAX_PENDING_INPUTS);
    const err = await validate([header, ...adds, add(MAX_PENDING_INPUTS)].join('\n')).then(
      () => undefined,
      (e: unknown) => e as ForklineError,
    );
    expect(err?.details).toEqual({ line: MAX_PENDING_INPUTS + 2, rule: 'inbox' });
    const cancel = JSON.stringify({ seq: MAX_PENDING_INPUTS, type: 'inbox/remove', data: { inputId: 'in_0', reason: 'cancelled' } });
    const { summary } = await validate([header, ...adds, cancel, add(MAX_PENDING_INPUTS + 1)].join('\n'));
    expect(summary.pendingInputs).toBe(MAX_PENDING_INPUTS);
  });
});

describe('recordingLines', () => {
  it('splits across chunk boundaries, accepts CRLF and a missing final newline', async () => {
    expect(await collect(recordingLines(['{"a"', ':1}\r', '\n{"b":2}\n{"c"', ':3}']))).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
    expect(await collect(recordingLines('x\n\ny\n'))).toEqual(['x', '', 'y']);
    expect(await collect(recordingLines(''))).toEqual([]);
  });

  it(`rejects recordings over ${MAX_RECORDING_BYTES / 2 ** 20} MB`, async () => {
    const err = await collect(recordingLines(['ab\n', 'cd\n', 'é\n'], 8)).catch((e: unknown) => e);
    expect((err as Error).message).toBe('line 3: size: the recording exceeds the size limit of 8 bytes');
    expect(await collect(recordingLines(['ab\n', 'cd\n'], 6))).toEqual(['ab', 'cd']);
  });

  it('refuses a line past the per-line limit as it grows, before it is held whole', async () => {
    const limit = 1000;
    // Bytes: an endless line in 100-byte chunks; the refusal comes within the limit's worth of chunks.
    let pulled = 0;
    function* endless() {
      yield Buffer.from('{"header":1}\n');
      for (;;) {
        pulled++;
        yield Buffer.alloc(100, 'A');
      }
    }
    const err = await collect(recordingLines(endless(), 1e9, limit)).catch((e: unknown) => e);
    expect((err as Error).message).toBe('line 2: size: a line is longer than the limit of 1000 bytes per line (FORKLINE_MAX_RECORDING_LINE_BYTES)');
    expect(pulled).toBe(11);
    // Text, the same; a line of exactly the limit passes, multi-byte characters counted as bytes.
    const text = await collect(recordingLines(['x\n', 'é'.repeat(501), '\n'], 1e9, limit)).catch((e: unknown) => e);
    expect((text as Error).message).toMatch(/^line 2: size: a line is longer than the limit of 1000 bytes/);
    expect(await collect(recordingLines([Buffer.from(`${'a'.repeat(limit)}\n${'b'.repeat(limit)}`)], 1e9, limit))).toEqual([
      'a'.repeat(limit),
      'b'.repeat(limit),
    ]);
    expect(await collect(recordingLines(`${'é'.repeat(500)}\n`, 1e9, limit))).toEqual(['é'.repeat(500)]);
  });
});

describe('recordingLines: compressed input', () => {
  it('a gzip-compressed recording is refused at its first line saying so (never inflated: a bomb costs its compressed bytes)', async () => {
    const recording = `${readFixture('v4-completed-tools.jsonl')}`;
    // In chunks, as an upload arrives; the first line break may fall anywhere in the compressed bytes.
    const gz = zlib.gzipSync(recording);
    const chunks = Array.from({ length: Math.ceil(gz.length / 64) }, (_, i) => gz.subarray(i * 64, (i + 1) * 64));
    const err = await collect(recordingLines(chunks)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ForklineError);
    expect((err as Error).message).toMatch(/^line 1: encoding: the line is not valid UTF-8 .*: it is gzip-compressed, and recordings are taken uncompressed/);
    // A line that is not UTF-8 and not gzip says only that.
    const other = await collect(recordingLines([Buffer.from([0x7b, 0xff, 0x0a])])).catch((e: unknown) => e);
    expect((other as Error).message).toBe('line 1: encoding: the line is not valid UTF-8 (invalid bytes are refused, not replaced)');
  });
});

describe('serializers', () => {
  it('write optional fields only when they say something', () => {
    expect(recordingLine({ seq: 0, type: 'session/title', data: { title: 't' } })).toBe('{"seq":0,"type":"session/title","data":{"title":"t"}}');
    expect(recordingLine({ seq: 1, type: 'turn/end', data: { turn: 1, reason: 'forked' }, inherited: true, synthetic: true, createdAt: new Date(0) })).toBe(
      '{"seq":1,"type":"turn/end","data":{"turn":1,"reason":"forked"},"createdAt":"1970-01-01T00:00:00.000Z","inherited":true,"synthetic":true}',
    );
    expect(recordingHeader({ id: 'ses_1' })).toEqual({ format: 'forkline.recording', version: 4, session: { id: 'ses_1', title: null } });
  });

  it.each(FIXTURES)('%s: validate → export → validate gives the same events', async (name) => {
    const { events, summary } = await validate(readFixture(name));
    const text = (await collect(exportLines(recordingHeader(summary.header.session), events))).join('');
    const again = await validate(text);
    expect(again.events).toEqual(events);
    expect(again.summary.header.version).toBe(4);
  });
});
