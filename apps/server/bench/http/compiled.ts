/**
 * The HTTP benchmark's processes as JavaScript compiled by tsc, as operators run the server (`node dist/main.js`,
 * README), not TypeScript through tsx's loader: tsx compiles with esbuild's `keepNames`, which wraps every function a
 * request makes (a closure per middleware, a callback per store call) in a `__name` call that defines its `name`, and
 * turns on source maps for the whole process. The server runs from `dist/` (built before the benchmark by
 * `scripts/build.mjs`); the floor and the ceiling, with the sources they import, and a `--baseline` copy of `src`,
 * are compiled here into `.bench-build/` in apps/server (inside it, so that their packages resolve as the server's).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative, resolve } from 'node:path';
import { removeOnExit, SERVER_ROOT } from './children.js';

const BUILD = join(SERVER_ROOT, '.bench-build');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

/** Emits `files` (relative to apps/server) and what they import under `rootDir` into `outDir`, unchecked (the tests typecheck). */
function compile(name: string, rootDir: string, outDir: string, include: string[]): void {
  const config = join(BUILD, `tsconfig.${name}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      extends: relative(BUILD, join(SERVER_ROOT, '../../tsconfig.base.json')),
      compilerOptions: { noEmit: false, rootDir: relative(BUILD, rootDir), outDir: relative(BUILD, outDir), sourceMap: false, incremental: false },
      include: include.map((file) => relative(BUILD, join(SERVER_ROOT, file))),
    }),
  );
  execFileSync(process.execPath, [tsc, '-p', config, '--noCheck'], { stdio: 'inherit' });
}

/** The floor and the ceiling compiled; their entry points, relative to apps/server. */
export function compileBenchProcesses(): { floor: string; ceiling: string } {
  rmSync(BUILD, { recursive: true, force: true });
  mkdirSync(removeOnExit(BUILD), { recursive: true });
  compile('processes', SERVER_ROOT, join(BUILD, 'processes'), ['bench/http/floor.ts', 'bench/http/ceiling.ts']);
  const at = (file: string) => relative(SERVER_ROOT, join(BUILD, 'processes', file));
  return { floor: at('bench/http/floor.js'), ceiling: at('bench/http/ceiling.js') };
}

/**
 * A pipeline floor (`pipeline-floor` for SQLite, `pg-pipeline-floor` for PostgreSQL: bench/http/<name>.ts) compiled,
 * beside the HTTP floor's build (which this leaves as it is: bench/pipeline.ts runs while bench/http.ts, whose build
 * that is, waits for it); its entry, relative to apps/server.
 */
export function compilePipelineFloor(name: 'pipeline-floor' | 'pg-pipeline-floor'): string {
  mkdirSync(BUILD, { recursive: true });
  const outDir = removeOnExit(join(BUILD, name));
  rmSync(outDir, { recursive: true, force: true });
  compile(name, SERVER_ROOT, outDir, [`bench/http/${name}.ts`]);
  return relative(SERVER_ROOT, join(outDir, `bench/http/${name}.js`));
}

/** A copy of `src` (a directory in apps/server) compiled as `dist/` is, its migrations beside it; its `main.js`, relative to apps/server. */
export function compileBaseline(sources: string): string {
  const rootDir = resolve(SERVER_ROOT, sources);
  const outDir = join(BUILD, 'baseline');
  compile('baseline', rootDir, outDir, [join(relative(SERVER_ROOT, rootDir), '**/*.ts')]);
  for (const store of ['sqlite', 'postgres']) {
    cpSync(join(rootDir, 'store', store, 'migrations'), join(outDir, 'store', store, 'migrations'), { recursive: true, filter: (path) => !path.endsWith('.ts') });
  }
  return relative(SERVER_ROOT, join(outDir, 'main.js'));
}
