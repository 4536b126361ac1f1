// DateTime (graphql/builder.ts) serializes a date to its ISO string where
// graphql-scalars' scalar hands back the Date: the JSON written is the same
// for every value, and a result holds no Date for JSON.stringify to call toJSON on.
import { describe, expect, it } from 'vitest';
import { GraphQLScalarType } from 'graphql';
import { DateTimeResolver } from 'graphql-scalars';
import { schema } from '../../src/graphql/schema.ts';

const ours = schema.getType('DateTime') as GraphQLScalarType;

/** What a serializer writes to the wire for a value, or the message it refuses it with. */
function wire(scalar: GraphQLScalarType, value: unknown): string {
  try {
    return JSON.stringify({ v: scalar.serialize(value) });
  } catch (err) {
    return `refused: ${(err as Error).message}`;
  }
}

describe('DateTime', () => {
  const values: unknown[] = [
    new Date('2026-12-05T03:51:54.264Z'),
    new Date(0),
    new Date(-1),
    new Date('+275760-09-13T00:00:00.000Z'),
    '2026-12-05T04:51:54.264+01:00',
    '2026-12-05T03:51:54Z',
    1_733_370_714_264,
    Number.NaN,
    new Date(Number.NaN),
    'yesterday',
    true,
    null,
    { at: 1 },
  ];

  it('writes exactly what graphql-scalars writes, refusals included', () => {
    for (const value of values) expect(wire(ours, value), String(value)).toBe(wire(DateTimeResolver, value));
  });

  it('serializes a valid date to a string, not a Date', () => {
    expect(ours.serialize(new Date('2026-12-05T03:51:54.264Z'))).toBe('2026-12-05T03:51:54.264Z');
    expect(ours.serialize('2026-12-05T04:51:54.264+01:00')).toBe('2026-12-05T03:51:54.264Z');
  });

  it('reads inputs as graphql-scalars does', () => {
    expect(ours.parseValue('2026-12-05T03:51:54.264Z')).toEqual(DateTimeResolver.parseValue('2026-12-05T03:51:54.264Z'));
    expect(ours.specifiedByURL).toBe(DateTimeResolver.specifiedByURL);
    expect(ours.description).toBe(DateTimeResolver.description);
  });
});
