// DATABASE_READ_URL: one hot standby or several, comma-separated.
import { expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';

it('reads one standby URL or several, comma-separated, and none when unset or empty', () => {
  expect(loadConfig({ DATABASE_READ_URL: 'postgresql://u:p@standby1:5432/forkline' }).DATABASE_READ_URL).toEqual(['postgresql://u:p@standby1:5432/forkline']);
  expect(loadConfig({ DATABASE_READ_URL: ' postgresql://a/x , postgresql://b/x,' }).DATABASE_READ_URL).toEqual(['postgresql://a/x', 'postgresql://b/x']);
  expect(loadConfig({}).DATABASE_READ_URL).toEqual([]);
  expect(loadConfig({ DATABASE_READ_URL: '' }).DATABASE_READ_URL).toEqual([]);
});

it('refuses an entry that is not a URL, naming the variable', () => {
  expect(() => loadConfig({ DATABASE_READ_URL: 'postgresql://a/x,standby2' })).toThrow(/invalid configuration: DATABASE_READ_URL\.1: /);
});
