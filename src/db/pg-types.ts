// Type parsers of the store's pool. pg's timestamptz parser (postgres-date)
// matches every value against a general regular expression; reading a sessions
// page it was a large share of the server's CPU (two timestamps per row). Postgres
// sends ISO text ('2026-11-30 08:55:01.123+00', DateStyle ISO, the default):
// that shape is read by hand (several times faster a value), anything else (BC,
// infinity, an offset with seconds, years before 100 or past 9999) by pg's parser.
import pg from 'pg';

const TIMESTAMPTZ = 1184;
const pgTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ, 'text') as (s: string) => Date;

/** The digits of text[from, from + length) as a number; NaN if any is not a digit. */
function digits(text: string, from: number, length: number): number {
  let v = 0;
  for (let i = from; i < from + length; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return NaN;
    v = v * 10 + d;
  }
  return v;
}

/** 'YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM]' read by hand; anything else by pg's parser. */
export function parseTimestamptz(text: string): Date {
  const n = text.length;
  if (n >= 22 && text[4] === '-' && text[7] === '-' && text[10] === ' ' && text[13] === ':' && text[16] === ':') {
    let i = 19;
    let ms = 0;
    if (text[i] === '.') {
      let scale = 100;
      for (i++; i < n && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57; i++, scale /= 10) ms += (text.charCodeAt(i) - 48) * scale;
      ms = Math.floor(ms + 1e-6);
    }
    const sign = text[i] === '+' ? 1 : text[i] === '-' ? -1 : 0;
    const offset = n === i + 3 ? digits(text, i + 1, 2) * 60 : n === i + 6 && text[i + 3] === ':' ? digits(text, i + 1, 2) * 60 + digits(text, i + 4, 2) : NaN;
    const year = digits(text, 0, 4);
    // Date.UTC reads years 0-99 as 1900-1999.
    const t = year < 100 ? NaN : Date.UTC(year, digits(text, 5, 2) - 1, digits(text, 8, 2), digits(text, 11, 2), digits(text, 14, 2), digits(text, 17, 2), ms);
    const at = t - sign * offset * 60_000;
    if (sign !== 0 && !Number.isNaN(at)) return new Date(at);
  }
  return pgTimestamptz(text);
}

export const storeTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === TIMESTAMPTZ && format !== 'binary' ? parseTimestamptz : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * The store's parsers, but timestamps left as Postgres's text: for rows that
 * parse them only when read (store/session-rows.ts, a page's rows; a column
 * it left as text is one of type `leftAsText`, parsed by parseTimestamptz).
 */
export const timestampsAsText: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === TIMESTAMPTZ && format !== 'binary' ? String : storeTypes.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/** Whether timestampsAsText leaves a column of this type (a result field's dataTypeID) as text. */
export const leftAsText = (dataTypeID: number): boolean => dataTypeID === TIMESTAMPTZ;
