// Logs: readable lines on a terminal, JSON lines otherwise (what collectors parse).
import { execFileSync } from 'node:child_process';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.ts';

const LOG_HELLO = `import('./src/logger.ts').then((m) => m.createLogger().info({ sessionId: 'ses_1' }, 'hello there'))`;
const run = (command: string, args: string[]) => execFileSync(command, args, { cwd: process.cwd(), encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });

function sink() {
  const lines: string[] = [];
  return { lines, stream: new Writable({ write: (c, _e, done) => (lines.push(String(c)), done()) }) };
}

describe('logs', () => {
  it('writes JSON lines when stdout is not a terminal', () => {
    const out = run(process.execPath, ['--import', 'tsx', '-e', LOG_HELLO]).trim();
    expect(JSON.parse(out)).toMatchObject({ level: 30, service: 'forkline', msg: 'hello there', sessionId: 'ses_1' });
  });

  it('writes readable lines on a terminal', () => {
    // `script` runs the process on a pseudo-terminal.
    const out = run('script', ['-qec', `${process.execPath} --import tsx -e "${LOG_HELLO.replace(/"/g, '\\"')}"`, '/dev/null']);
    expect(out).toMatch(/INFO.*hello there/);
    expect(out).toMatch(/sessionId: "ses_1"/);
    expect(() => JSON.parse(out.trim())).toThrow();
  });

  it('can be told either way', () => {
    const json = sink();
    createLogger('info', { destination: json.stream, pretty: false }).warn('careful');
    expect(JSON.parse(json.lines[0])).toMatchObject({ level: 40, msg: 'careful' });
    const pretty = sink();
    createLogger('info', { destination: pretty.stream, pretty: true }).warn('careful');
    expect(pretty.lines.join('')).toMatch(/WARN.*careful/);
  });
});
