// The Python runner SDK (packages/python/forkline_runner) cannot import src/core: it keeps copies of forkline's
// rules (docs/runners.md): how text from outside is made storable (storable_text, src/core/storable.ts), how a
// reply's calls are recorded (call_ids.py, core/model-calls.ts admitCalls) and which tool names need a wire form and
// how a request's forms are read back (wire_names.py, core/wire-names.ts). Held here to agree with the core's on the
// same hostile inputs, generated below and answered by one python3 process (JSON over stdin/stdout), so the copies
// cannot drift. The old copy cut a tool name past 200 characters at 200 code points, then dropped what did not
// fit: a name whose 200th UTF-16 unit began a pair lost it, where forkline's own agent keeps U+FFFD in its place.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { admitCalls } from '../../src/core/model-calls.ts';
import { toStorableText } from '../../src/core/storable.ts';
import { WireToolNames, wireToolName, wireToolNamesOf } from '../../src/core/wire-names.ts';
import { decodeEvent } from '../../src/core/events.ts';
import { resultIdOf } from '../../packages/runner/src/call-ids.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

/** `n` strings of pieces that make and break pairs, from a fixed seed (the same inputs every run). */
function mixed(n: number, seed: number, pieces: string[], most = 9): string[] {
  const next = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed);
  return Array.from({ length: n }, () => Array.from({ length: next() % most }, () => pieces[next() % pieces.length]).join(''));
}
const TEXT_PIECES = ['a', '\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '\ud83d\ude00', 'é', '\ufffd', '"', '\\', '\n'];

/** Text a model may answer: NULs, lone and paired surrogates, at either end, escaped forms that are already storable. */
const HOSTILE_TEXT = ['\u0000', '\udc00\ud800', '{"key":"a\u0000b"}', '{"key":"\ud83d\ude00 paired"}', '{"key":"\\u0000 escaped"}', 'end\ud83d', '\ufffd', ''];

/** Ids of the lengths providers and the log draw lines at (39-41, 64-65, 199-201, 300), holding what each refuses. */
function hostileIds(): string[] {
  const lengths = [1, 39, 40, 41, 64, 65, 199, 200, 201, 300];
  const ids = ['', 'call_1', 'call_2', 'call_2_', 'earlier', 'toolu 1', 'a.b', 'é', '\ud83d\ude00'];
  for (const n of lengths) {
    ids.push('x'.repeat(n), `${'x'.repeat(n - 1)}\u0000`, `${'x'.repeat(n - 1)}\ud800`, `\udc00${'x'.repeat(n - 1)}`);
    if (n > 1) ids.push(`${'x'.repeat(n - 2)}\ud83d\ude00`, `${'x'.repeat(n - 1)}\ud83d\ude00`);
  }
  return [...ids, ...mixed(40, 0x1d5, ['a', '_', '-', ' ', '\u0000', '\ud800', '\udc00', '\ud83d\ude00', 'call_1'])];
}

/** Tool names that are sent as they are, that need a wire form (dots, spaces, a leading digit, past 64), and that the log refuses. */
function hostileNames(): string[] {
  const names = ['lookup', '_x', '-x', '1x', 'files.read v2', 'files_read_v2', 'fs__files.read', 'Lookup', 'é', 'a\n', '', '\u0000'];
  for (const n of [63, 64, 65, 199, 200, 201, 300]) {
    names.push('y'.repeat(n), `${'y'.repeat(n - 1)}\ud83d\ude00`, `${'y'.repeat(n - 2)}\ud83d\ude00`, `${'y'.repeat(n - 1)}\udc00`, `y.${'y'.repeat(n - 2)}`);
  }
  return [...names, ...mixed(40, 0x4a7e, ['l', '.', ' ', '_', '-', '1', '\u0000', '\ud800', '\udfff', '\ud83d\ude00', 'é'])];
}

/** The Python copies' answers to `input` (see tests/fixtures/runners/python_rules.py), from one python3 process. */
function python(input: unknown): any {
  const run = spawnSync('python3', [path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_rules.py')], {
    input: JSON.stringify(input),
    env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python') },
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return JSON.parse(run.stdout);
}

describe("the Python runner's copies of forkline's rules", () => {
  const texts = [...HOSTILE_TEXT, ...mixed(5000, 0x5eed, TEXT_PIECES)];
  const ids = hostileIds();
  const names = hostileNames();
  const earlier = ['earlier', 'call_2', 'x'.repeat(40)];
  // Steps of 1-6 calls, ids and names drawn so that ids repeat within a step and the history's come back.
  const steps = Array.from({ length: 3000 }, (_, k) => ({
    calls: Array.from({ length: 1 + (k % 6) }, (_, i) => ({
      id: ids[(k * 7 + i * 3) % ids.length],
      name: names[(k * 5 + i * 11) % names.length],
      arguments: '{}',
    })),
    earlier,
  }));
  // Tool sets whose forms may meet (a name and its own form), in both orders.
  const toolSets = Array.from({ length: 300 }, (_, k) => {
    const some = Array.from({ length: 1 + (k % 5) }, (_, i) => names[(k * 13 + i * 7) % names.length]).filter((n) => n !== '');
    const offered = [...new Set(k % 2 ? [...some, ...some.map(wireToolName)] : [...some.map(wireToolName), ...some])];
    return {
      offered,
      request: {
        messages: [],
        tools: offered.map((name) => ({ name })),
        wireToolNames: wireToolNamesOf(
          [],
          offered.map((name) => ({ name })),
        ),
      },
    };
  });
  // Every id a reply's call may be recorded under (admitCalls keeps ids up to the log's bound), in a session of each length.
  const resultIds = ['ses_0123456789abcdef0123456789abcdef', 'ses_x'].flatMap((session) =>
    ids
      .filter((id) => admitCalls([{ id, name: 'lookup', arguments: '{}' }], new Set(), new Set(['lookup'])).calls[0].id === id)
      .map((call) => ({ session, call })),
  );
  const answered = python({
    resultIds,
    storable: texts,
    admit: steps,
    names,
    wire: toolSets.map(({ request, offered }) => ({ request, offered, asked: [...offered, ...offered.map(wireToolName), 'unknown', ...names.slice(0, 20)] })),
  });

  it('make text storable as src/core does (storable_text)', () => {
    expect(answered.storable).toEqual(texts.map(toStorableText));
  });

  it("record a reply's calls under the ids and names forkline's own agent gives, refusing the same ones for the same reason (admit_calls)", () => {
    const core = steps.map(({ calls }) => {
      // Every name offered, as given and as cut: which tools a request offers is WireNames' part, checked below.
      const offered = new Set(calls.flatMap((c) => [c.name, toStorableText(c.name.slice(0, 200)) || 'unnamed']));
      const { calls: out, refused } = admitCalls(calls, new Set(earlier), offered);
      return out.map((c) => [c.id, c.name, refused.get(c.id) ?? null]);
    });
    expect(answered.admit).toEqual(core);
    // The inputs reach every outcome: kept, renamed (each reason), refused, a name cut.
    const flat = core.flat();
    for (const why of ['1-200 allowed', 'NUL character', 'another call of this step', 'named a tool of', 'named a tool with'])
      expect(flat.some((c) => String(c[2]).includes(why))).toBe(true);
    expect(flat.some((c) => c[2] === null && /^call_\d+_*$/.test(c[0] as string))).toBe(true);
  });

  it("name a call's result as the TypeScript runner does, an id the log holds for every call id it keeps (result_id)", () => {
    expect(answered.resultIds).toEqual(resultIds.map(({ session, call }) => resultIdOf(session, call)));
    for (const [i, { call }] of resultIds.entries()) {
      const result = { turn: 1, step: 1, callId: call, resultId: answered.resultIds[i], status: 'ok', content: '', name: 'lookup' };
      expect(() => decodeEvent('tool/result', result)).not.toThrow();
    }
    // Ids of the bound's length reach the digested form.
    expect(answered.resultIds.some((r: string) => r.length < 60 && /^res_ses_x_[\w-]{16}$/.test(r))).toBe(true);
  });

  it('tell which names need a wire form as src/core does (needs_wire_names)', () => {
    expect(answered.needsWire).toEqual(names.map((n) => wireToolName(n) !== n));
    expect(answered.needsWire).toContain(true);
    expect(answered.needsWire).toContain(false);
  });

  it("offer and read back a request's tools as forkline's own agent does (WireNames)", () => {
    const core = toolSets.map(({ offered }) => {
      const wire = new WireToolNames(offered);
      const asked = [...offered, ...offered.map(wireToolName), 'unknown', ...names.slice(0, 20)];
      return { wireName: offered.map(wireToolName), offers: offered.map((n) => wire.offers(n)), toolOf: asked.map((n) => wire.toolOf(n) ?? null) };
    });
    expect(answered.wire).toEqual(core);
    expect(core.some((c) => c.offers.includes(false))).toBe(true);
  });
});
