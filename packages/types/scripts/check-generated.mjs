#!/usr/bin/env node
// Fails when the committed src/openapi.ts is not what openapi-typescript makes
// of the current bundle: someone edited the spec without `pnpm generate`, or
// edited the generated file by hand.
//
//   node scripts/check-generated.mjs [--spec <bundle.json>] [--generated <file.ts>]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const here = new URL('..', import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    spec: { type: 'string', default: resolve(here, '../../spec/dist/openapi.json') },
    generated: { type: 'string', default: resolve(here, 'src/openapi.ts') },
  },
});

const cli = resolve(here, 'node_modules/openapi-typescript/bin/cli.js');
const scratch = mkdtempSync(join(tmpdir(), 'vidgen-types-'));
try {
  const fresh = join(scratch, 'openapi.ts');
  execFileSync(process.execPath, [cli, values.spec, '--output', fresh], { stdio: 'pipe' });
  const expected = readFileSync(fresh, 'utf8');
  const committed = readFileSync(values.generated, 'utf8');
  if (expected !== committed) {
    const lines = [expected.split('\n'), committed.split('\n')];
    const first = lines[0].findIndex((line, i) => line !== lines[1][i]);
    console.error(
      `${values.generated} is out of date with ${values.spec} (first difference at line ${first + 1}).\n` +
        'Run `pnpm --filter @vidgen/types generate` after changing the spec, and commit the result.',
    );
    process.exit(1);
  }
  console.log(`${values.generated} matches ${values.spec}`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
