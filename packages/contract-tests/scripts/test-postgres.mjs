// The contract suite against the real server on PostgreSQL. Without a reachable PostgreSQL it
// says so and skips, except under CI=true, where that is a failure.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const adminUrl = process.env.VIDGEN_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2_000 });
try {
  await client.connect();
  await client.end();
} catch (error) {
  if (process.env.CI === 'true') {
    console.error(`CI=true and PostgreSQL is not reachable at ${adminUrl}: ${error.message}`);
    process.exit(1);
  }
  console.log(`contract suite on PostgreSQL skipped: not reachable at ${adminUrl}`);
  process.exit(0);
}
const vitest = fileURLToPath(new URL('../node_modules/.bin/vitest', import.meta.url));
const run = spawnSync(vitest, ['run'], { stdio: 'inherit', env: { ...process.env, VIDGEN_CONTRACT_TARGET: 'server', VIDGEN_CONTRACT_DATABASE: 'postgres' } });
if (run.error) console.error(run.error.message);
process.exit(run.status ?? 1);
