// How a stdio MCP server's stdout is cut into messages (mcp-stdio.ts): lines
// across chunks, "\r\n", a line past the bound, and work linear in the bytes.
import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../src/agent/mcp/mcp-stdio.ts';

const chunksOf = (text: string, size: number) => {
  const b = Buffer.from(text);
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return out;
};

describe('LineSplitter', () => {
  it('answers whole lines, however the chunks fall, without their line ends', () => {
    const lines = new LineSplitter(100);
    const got: string[] = [];
    for (const c of chunksOf('{"a":1}\r\n\n{"b":"ü"}\n{"c"', 3)) got.push(...(lines.push(c) as string[]));
    expect(got).toEqual(['{"a":1}', '', '{"b":"ü"}']);
    expect(lines.push(Buffer.from(':2}\n'))).toEqual(['{"c":2}']);
  });

  it('refuses a line past its bound, in one chunk or many, and then starts afresh', () => {
    expect(new LineSplitter(10).push(Buffer.from(`${'x'.repeat(11)}\n`))).toBeInstanceOf(Error);
    const lines = new LineSplitter(10);
    expect(lines.push(Buffer.from('x'.repeat(6)))).toEqual([]);
    expect(lines.push(Buffer.from('x'.repeat(6)))).toEqual(expect.objectContaining({ message: 'a message over 10 bytes' }));
    expect(lines.push(Buffer.from('ok\n'))).toEqual(['ok']);
    expect(new LineSplitter(10).push(Buffer.from(`${'x'.repeat(10)}\n`))).toEqual(['x'.repeat(10)]);
  });

  it('reads a 3 MB message that arrives in 4 KiB chunks copying each byte once (the SDK buffer joins each chunk to all before it)', () => {
    const message = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'a'.repeat(3 * 1024 * 1024) } };
    const chunks = chunksOf(`${JSON.stringify(message)}\n`, 4096);
    const bytes = chunks.reduce((n, c) => n + c.length, 0);
    // Bytes copied into joined buffers, counted: the work that grows with a message's length, whatever the clock says.
    const copiedBy = (fn: () => void) => {
      const concat = Buffer.concat;
      let copied = 0;
      Buffer.concat = ((list: readonly Uint8Array[], total?: number) => {
        const joined = concat(list, total);
        copied += joined.length;
        return joined;
      }) as typeof Buffer.concat;
      try {
        fn();
      } finally {
        Buffer.concat = concat;
      }
      return copied;
    };
    const ours = copiedBy(() => {
      const lines = new LineSplitter(10 * 1024 * 1024);
      const got = chunks.flatMap((c) => lines.push(c) as string[]);
      expect(JSON.parse(got[0]!)).toEqual(message);
    });
    // The SDK's stdio buffer (1.32): each chunk joined to all before it, then searched for a newline.
    const joined = copiedBy(() => {
      let buffer: Buffer | undefined;
      for (const c of chunks) {
        buffer = buffer ? Buffer.concat([buffer, c]) : c;
        if (buffer.indexOf('\n') !== -1) break;
      }
      expect(JSON.parse(buffer!.toString('utf8').trimEnd())).toEqual(message);
    });
    console.log(`3 MB message in 4 KiB chunks: LineSplitter copies ${ours} bytes, joined per chunk ${joined}`);
    expect(ours).toBeLessThanOrEqual(bytes); // the SDK's way: about 1.2 GB for this message
    expect(joined).toBeGreaterThan(100 * bytes);
  });
});
