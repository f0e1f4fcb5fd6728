/**
 * Builds dist/: ESM and .d.ts by tsc (tsconfig.build.json), then makes the package carry the
 * API's generated types. In the workspace src/openapi.ts re-exports `@vidgen/types`; here its
 * emitted dist/openapi.d.ts is replaced by the generated declarations themselves (the file
 * openapi-typescript wrote holds only interfaces and type aliases, so it is a valid .d.ts), and
 * the build fails if anything in dist/ still names `@vidgen/types`.
 *
 * Built in a staging folder and moved into dist/ file by file (each `rename` atomic): other
 * packages' tests and typechecks read dist/ while this package's own test packs it (`prepack`
 * builds), so dist/ is never absent or half written.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const dist = join(root, 'dist');
const require = createRequire(import.meta.url);

const staging = mkdtempSync(join(root, '.dist-'));
try {
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json'), '--outDir', staging], { stdio: 'inherit' });

  const generated = join(dirname(require.resolve('@vidgen/types')), 'openapi.ts');
  copyFileSync(generated, join(staging, 'openapi.d.ts'));

  const built = readdirSync(staging);
  const leaks = built.filter((file) => readFileSync(join(staging, file), 'utf8').includes('@vidgen/types'));
  if (leaks.length > 0) throw new Error(`dist/ would still refer to @vidgen/types: ${leaks.join(', ')}`);

  mkdirSync(dist, { recursive: true });
  for (const file of built) renameSync(join(staging, file), join(dist, file));
  for (const file of readdirSync(dist)) if (!built.includes(file)) rmSync(join(dist, file), { recursive: true, force: true });
} finally {
  rmSync(staging, { recursive: true, force: true });
}
