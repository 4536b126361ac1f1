#!/usr/bin/env node
// Before `npm test` (and from tests/helpers/pgbouncer.ts when run alone): the
// pooler tests put real PgBouncers in front of the test Postgres: Debian 12's
// package (1.18, before protocol-level prepared statements) and 1.24.1 built
// from source (prepared statements on). Exits 0 either way: the tests that need
// a missing one fail with the reason, the rest of the suite runs.
import { ensureAptPackage } from './apt-package.mjs';
import { buildPgBouncer } from './build-pgbouncer.mjs';

const only = process.argv[2]; // 'debian' or 'source' (the test helper asks for one)
if (only !== 'source') ensureAptPackage({ binary: process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer', pkg: 'pgbouncer', what: 'the PgBouncer tests' });
if (only !== 'debian') await buildPgBouncer().catch((err) => console.error(`${err.message}: the PgBouncer 1.24 tests will fail`));
