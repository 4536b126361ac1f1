// What the CLI and the dashboard's names show of hostile text (core/visible-text.ts).
import { describe, expect, it } from 'vitest';
import { visibleLines, visibleText } from '../../src/core/visible-text.ts';

describe('visibleText', () => {
  it('shows terminal controls as escapes: no ESC, CSI, BEL, CR or BS is left to a terminal', () => {
    const hostile = '\x1b[2J\x1b]52;c;cHduZWQ=\x07\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ ok\rfake\x08\x9b31m\x7f';
    const shown = visibleText(hostile);
    // eslint-disable-next-line no-control-regex -- what must not remain
    expect(shown).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(shown).toBe('\\x1b[2J\\x1b]52;c;cHduZWQ=\\x07\\x1b]8;;http://evil.example\\x1b\\link\\x1b]8;;\\x1b\\ ok\\x0dfake\\x08\\x9b31m\\x7f');
  });

  it('shows bidi controls and invisible characters, and leaves joiners and ordinary text alone', () => {
    expect(visibleText('invoice\u202Etxt.exe\u202C')).toBe('invoice\\u202etxt.exe\\u202c');
    expect(visibleText('pay\u200Bpal\u2066x\u2069\uFEFF\u{E0041}')).toBe('pay\\u200bpal\\u2066x\\u2069\\ufeff\\u{e0041}');
    const ordinary = 'résumé — 日本語 שלום مرحبا 👩\u200D💻 ab\u200Ccd <b>&amp;</b>';
    expect(visibleText(ordinary)).toBe(ordinary);
  });

  it('visibleLines keeps newlines and tabs (CRLF as LF) and escapes the rest', () => {
    expect(visibleLines('a\r\nb\tc\nd\re\x1b[1A')).toBe('a\nb\tc\nd\\x0de\\x1b[1A');
    expect(visibleText('a\nb\tc')).toBe('a\\x0ab\\x09c');
  });
});
