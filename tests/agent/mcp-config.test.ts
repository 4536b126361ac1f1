// FORKLINE_MCP_CONFIG: the mcpServers shape other hosts read, refused clearly when wrong.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadMcpConfig, parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';

describe('MCP config', () => {
  it('reads stdio and HTTP servers in the shape Claude Code, Cursor and Codex use, with defaults', () => {
    const c = parseMcpConfig(
      JSON.stringify({
        mcpServers: {
          files: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv'], env: { A: '1' } },
          remote: { type: 'http', url: 'https://tools.example.com/mcp', headers: { Authorization: 'Bearer x' }, trusted: false },
          off: { command: 'x', disabled: true },
        },
      }),
    );
    expect(Object.keys(c.mcpServers)).toEqual(['files', 'remote']);
    expect(c.mcpServers.files).toMatchObject({ trusted: true, tools: {}, env: { A: '1' } });
    expect(c.mcpServers.remote).toMatchObject({ trusted: false, headers: { Authorization: 'Bearer x' } });
  });

  it.each([
    ['not JSON', '{', /not valid JSON/],
    ['a name with __ (the separator of <server>__<tool>)', JSON.stringify({ mcpServers: { a__b: { command: 'x' } } }), /mcpServers\.a__b/],
    ['a misspelt key (a typo must not silently trust)', JSON.stringify({ mcpServers: { a: { command: 'x', trustd: false } } }), /trustd/],
    ['an unknown effect', JSON.stringify({ mcpServers: { a: { command: 'x', effect: 'harmless' } } }), /effect/],
    ['neither a command nor a URL', JSON.stringify({ mcpServers: { a: { args: [] } } }), /mcpServers\.a/],
    ['a URL that is not http(s)', JSON.stringify({ mcpServers: { a: { url: 'file:///etc/passwd' } } }), /mcpServers\.a/],
  ])('refuses %s, naming the place', (_what, text, message) => {
    expect(() => parseMcpConfig(text)).toThrow(message);
  });

  it('names the file it cannot read', () => {
    const missing = path.join(os.tmpdir(), 'no-such-forkline-mcp.json');
    expect(() => loadMcpConfig(missing)).toThrow(`cannot read ${missing} (ENOENT)`);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-')), 'mcp.json');
    fs.writeFileSync(file, '[]');
    expect(() => loadMcpConfig(file)).toThrow(file);
  });
});
