/**
 * Builds dist/: ESM and .d.ts by tsc (tsconfig.build.json), then makes the package carry the
 * API's generated types. In the workspace src/openapi.ts re-exports `@vidgen/types`; here its
 * emitted dist/openapi.d.ts is replaced by the generated declarations themselves (the file
 * openapi-typescript wrote holds only interfaces and type aliases, so it is a valid .d.ts), and
 * the build fails if anything in dist/ still names `@vidgen/types`.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const dist = join(root, 'dist');
const require = createRequire(import.meta.url);

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });

const generated = join(dirname(require.resolve('@vidgen/types')), 'openapi.ts');
copyFileSync(generated, join(dist, 'openapi.d.ts'));

const leaks = readdirSync(dist).filter((file) => readFileSync(join(dist, file), 'utf8').includes('@vidgen/types'));
if (leaks.length > 0) {
  console.error(`dist/ still refers to @vidgen/types: ${leaks.join(', ')}`);
  process.exit(1);
}
