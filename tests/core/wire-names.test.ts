// Ids and names on the wire (docs/agents.md "Ids and names on the wire"): what
// the log keeps as it came, and the form a request sends, which every provider
// takes, never two originals in one form, derived from the original alone.
import { describe, expect, it } from 'vitest';
import { WIRE_ID, WIRE_TOOL_NAME, WireToolNames, wireId, wireIdWith, wireToolName } from '../../src/core/wire-names.ts';

/** The providers' own rules (tests/helpers/provider-rules.ts has where each comes from). */
const RULES = {
  chatId: (id: string) => id.length <= 40,
  responsesId: (id: string) => id.length <= 64,
  anthropicId: (id: string) => /^[a-zA-Z0-9_-]+$/.test(id),
  openaiName: (n: string) => /^[a-zA-Z0-9_-]{1,64}$/.test(n),
  anthropicName: (n: string) => /^[a-zA-Z0-9_-]{1,128}$/.test(n),
  geminiName: (n: string) => /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/.test(n),
};
const idTaken = (id: string) => RULES.chatId(id) && RULES.responsesId(id) && RULES.anthropicId(id);
const nameTaken = (n: string) => RULES.openaiName(n) && RULES.anthropicName(n) && RULES.geminiName(n);

const HOSTILE_IDS = [
  'x'.repeat(10 * 1024),
  'call 1',
  'call\u00001',
  'toolu_01\u0007bell',
  'ünïcödé',
  '😀😀',
  '\u202eevil',
  'a.b',
  'a?b',
  'x'.repeat(41),
  'x'.repeat(64),
  '',
];
const HOSTILE_NAMES = ['fs__files.read', 'fs__a/b', 'fs__has space', 'fs__ümlaut', 'n'.repeat(200), '1password__get', '-dash', 'fs__x'.repeat(30), '😀', ''];

describe('wireId', () => {
  it('keeps an id every provider takes', () => {
    for (const id of ['call_0', 'toolu_01ABCdef-_', 'x'.repeat(40)]) expect(wireId(id)).toBe(id);
  });
  it('gives any other id a form every provider takes, distinct for distinct ids, the same each time', () => {
    const forms = HOSTILE_IDS.map(wireId);
    for (const f of forms) {
      expect(f).toMatch(WIRE_ID);
      expect(idTaken(f)).toBe(true);
    }
    expect(new Set(forms).size).toBe(HOSTILE_IDS.length);
    expect(HOSTILE_IDS.map(wireId)).toEqual(forms);
    // What can be read of it stays.
    expect(wireId('call 1')).toMatch(/^call_1_[A-Za-z0-9_-]{16}$/);
  });
  it('a suffix makes room for itself: the whole is still a wire id', () => {
    expect(wireIdWith('x'.repeat(38), '_t1s3')).toBe(`${'x'.repeat(35)}_t1s3`);
    expect(wireIdWith('call_0', '_t1s2')).toBe('call_0_t1s2');
    const huge = wireIdWith('x'.repeat(40), `_t${Number.MAX_SAFE_INTEGER}s${Number.MAX_SAFE_INTEGER}_12`);
    expect(huge).toMatch(WIRE_ID);
  });
});

describe('wireToolName', () => {
  it('keeps a name every provider takes', () => {
    for (const n of ['read_file', 'fs__edit_file', '_x', 'a-b']) expect(wireToolName(n)).toBe(n);
  });
  it('gives any other name a form every provider takes (Gemini: a letter or _ first), distinct for distinct names', () => {
    const forms = HOSTILE_NAMES.map(wireToolName);
    for (const f of forms) {
      expect(f).toMatch(WIRE_TOOL_NAME);
      expect(nameTaken(f)).toBe(true);
    }
    expect(new Set(forms).size).toBe(HOSTILE_NAMES.length);
    expect(wireToolName('fs__files.read')).toMatch(/^fs__files_read_[A-Za-z0-9_-]{16}$/);
    expect(wireToolName('1password__get')).toMatch(/^_1password__get_/);
  });
});

describe('WireToolNames', () => {
  it('offers one tool to a wire name (the first given) and reads an answer back to it', () => {
    const crafted = wireToolName('fs__files.read'); // a valid name: exactly the wire form of another
    const names = new WireToolNames(['read_file', 'fs__files.read', crafted, 'fs__ümlaut', 'other__files.read']);
    expect(names.offers('fs__files.read')).toBe(true);
    expect(names.offers(crafted)).toBe(false);
    expect(names.left).toEqual([crafted]);
    expect(names.toolOf(crafted)).toBe('fs__files.read');
    expect(names.toolOf(wireToolName('fs__ümlaut'))).toBe('fs__ümlaut');
    expect(names.toolOf(wireToolName('other__files.read'))).toBe('other__files.read');
    expect(names.toolOf('read_file')).toBe('read_file');
    // Any name no tool was offered under: none (a made-up name, a tool's own name instead of its form, another case).
    for (const n of ['made.up', 'fs__files.read', 'READ_FILE']) expect(names.toolOf(n)).toBeUndefined();
  });
});
