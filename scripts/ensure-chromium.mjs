#!/usr/bin/env node
// Before `npm test`: the dashboard's browser tests drive Debian's Chromium
// (playwright-core never downloads a browser). Installs it with apt when it is
// missing and we may (root on Debian); otherwise says how, and the browser
// tests fail with the same message rather than being skipped.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (existsSync(path)) process.exit(0);
if (process.env.CHROMIUM_PATH) {
  console.error(`CHROMIUM_PATH=${path} does not exist: the browser tests will fail`);
  process.exit(0);
}
const canApt = process.getuid?.() === 0 && existsSync('/usr/bin/apt-get');
if (!canApt) {
  console.error('Chromium is missing: install it (sudo apt-get install chromium) or set CHROMIUM_PATH; the browser tests will fail without it');
  process.exit(0);
}
console.log('installing Debian chromium for the browser tests (apt-get)…');
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
const run = (args) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env }).status === 0;
if (!(run(['update', '-qq']) && run(['install', '-y', '-qq', 'chromium']))) {
  console.error('apt-get could not install chromium: the browser tests will fail');
}
