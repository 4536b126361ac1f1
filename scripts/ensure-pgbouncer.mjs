#!/usr/bin/env node
// Before `npm test` (and from tests/helpers/pgbouncer.ts when run alone): the
// scale-out tests put a real PgBouncer (Debian's package) in front of the test Postgres.
import { ensureAptPackage } from './apt-package.mjs';

ensureAptPackage({ binary: process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer', pkg: 'pgbouncer', what: 'the PgBouncer tests' });
