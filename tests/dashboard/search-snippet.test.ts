// The dashboard's split of search snippets into plain and matched parts (the
// parts are rendered as text nodes and <b> elements, never as HTML).
import { describe, expect, it } from 'vitest';
import { snippetParts } from '../../client/dashboard/src/snippet.ts';

describe('snippetParts', () => {
  it('flags the words between ⟦ and ⟧, merging neighbours', () => {
    expect(snippetParts('The ⟦gantry⟧ ⟦crane⟧ unloads <b>ships</b>')).toEqual([
      { text: 'The ', match: false },
      { text: 'gantry', match: true },
      { text: ' ', match: false },
      { text: 'crane', match: true },
      { text: ' unloads <b>ships</b>', match: false },
    ]);
    expect(snippetParts('⟦a⟧⟦b⟧')).toEqual([{ text: 'ab', match: true }]);
  });

  it('keeps unbalanced marks in the content as plain text', () => {
    expect(snippetParts('no marks')).toEqual([{ text: 'no marks', match: false }]);
    expect(snippetParts('')).toEqual([]);
    expect(snippetParts('a ⟦b c')).toEqual([{ text: 'a b c', match: false }]);
    expect(snippetParts('a⟧ b')).toEqual([{ text: 'a⟧ b', match: false }]);
  });
});
