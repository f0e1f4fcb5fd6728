// Compiles the server and the CLI to JavaScript in dist/ (tsc), and copies what tsc does not: the
// numbered SQL migrations each store reads beside its compiled code. `--no-check` emits without type
// checking (the tests' setup: typechecking is a task of its own, and a type error elsewhere must not stop every test).
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
rmSync(join(root, 'dist'), { recursive: true, force: true });
const noCheck = process.argv.includes('--no-check') ? ['--noCheck'] : [];
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), ...noCheck], { stdio: 'inherit' });
for (const store of ['sqlite', 'postgres']) {
  const from = join(root, 'src/store', store, 'migrations');
  const to = join(root, 'dist/store', store, 'migrations');
  cpSync(from, to, { recursive: true, filter: (path) => !path.endsWith('.ts') });
  console.log(`build: ${readdirSync(to).length} ${store} migrations copied`);
}
chmodSync(join(root, 'dist/cli/main.js'), 0o755);
