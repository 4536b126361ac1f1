#!/usr/bin/env node
// Before `npm test`: the dashboard's browser tests drive Debian's Chromium
// (playwright-core never downloads a browser).
import { existsSync } from 'node:fs';
import { ensureAptPackage } from './apt-package.mjs';

const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (process.env.CHROMIUM_PATH && !existsSync(path)) {
  console.error(`CHROMIUM_PATH=${path} does not exist: the browser tests will fail`);
  process.exit(0);
}
ensureAptPackage({ binary: path, pkg: 'chromium', what: 'the browser tests' });
