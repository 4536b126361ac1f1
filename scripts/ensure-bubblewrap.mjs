#!/usr/bin/env node
// Before `npm test`: the shell tool's tests (tests/security/shell-*.test.ts,
// tests/agent/shell.test.ts) run commands in Debian's bubblewrap sandbox, as
// FORKLINE_SHELL=on does in production.
import { ensureAptPackage } from './apt-package.mjs';

ensureAptPackage({ binary: '/usr/bin/bwrap', pkg: 'bubblewrap', what: 'the shell sandbox tests' });
