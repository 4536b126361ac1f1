// Items cut into consecutive groups of at most `maxBytes` together, in order
// (an item larger than that alone in its group): the pages a reader asks for
// or the payloads a writer sends, bounded in bytes rather than in count.

/** `items` in order, grouped so no group's sizes sum past `maxBytes` unless it holds one item. */
export function groupsBySize<T>(items: Iterable<{ item: T; bytes: number }>, maxBytes: number): T[][] {
  const groups: T[][] = [];
  let group: T[] = [];
  let bytes = 0;
  for (const { item, bytes: size } of items) {
    if (group.length && bytes + size > maxBytes) {
      groups.push(group);
      group = [];
      bytes = 0;
    }
    group.push(item);
    bytes += size;
  }
  if (group.length) groups.push(group);
  return groups;
}
