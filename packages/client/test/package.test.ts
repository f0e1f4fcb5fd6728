/**
 * The packed package is self-contained: `pnpm pack` it, install the tarball with npm into an
 * empty project outside the workspace, typecheck a script that uses it (NodeNext resolution)
 * and run that script against the real server. Then the same install from CommonJS: a `.cjs`
 * script that `require`s it (Node 20.19+ loads the ESM build synchronously), and a CommonJS
 * TypeScript project that typechecks, compiles and runs.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, inject, it } from 'vitest';

const run = promisify(execFile);
const fixture = inject('fixture');
const packageDir = resolve(import.meta.dirname, '..');
const require = createRequire(import.meta.url);
const tsc = require.resolve('typescript/bin/tsc');
const nodeTypes = resolve(packageDir, 'node_modules/@types');
/** The pnpm running this suite (turbo and pnpm set npm_execpath), else the one on PATH. */
function pnpm(): [string, string[]] {
  const execPath = process.env.npm_execpath;
  if (execPath && /pnpm/.test(execPath)) return /\.[cm]?js$/.test(execPath) ? [process.execPath, [execPath]] : [execPath, []];
  return ['pnpm', []];
}
/** The npm that ships with this node. */
const npm = existsSync(join(dirname(process.execPath), 'npm')) ? join(dirname(process.execPath), 'npm') : 'npm';
const work = mkdtempSync(join(tmpdir(), 'vidgen-client-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
/** The consumer project the tarball is installed in (by the first test). */
const app = join(work, 'app');

const checkScript = `// @ts-check
import { createClient, VidgenError } from '@vidgen/client';

/** @param {import('@vidgen/client').Task} task */
const describe = (task) => \`\${task.requestId} \${task.status}\`;

const client = createClient({ baseUrl: process.env.VIDGEN_BASE_URL ?? '', apiKey: process.env.VIDGEN_API_KEY ?? '' });
const submitted = await client.submit({ model: 'vidgen-2.0-fast', prompt: 'From the packed package', duration: 4, resolution: '480p' });
/** @type {string} */
const requestId = submitted.requestId;
const task = await client.get(requestId);
/** @type {import('@vidgen/client').components['schemas']['TaskStatus']} */
const status = task.status;
if (task.status === 'succeeded') {
  /** @type {string} */
  const url = task.output.url;
  console.error(url);
}
let notFound = '';
try {
  await client.get('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0');
} catch (error) {
  if (error instanceof VidgenError) notFound = \`\${error.status} \${error.code}\`;
}
console.log(JSON.stringify({ requestId, status, notFound, described: describe(task) }));

// Mistakes the declarations must catch (never called): an unused @ts-expect-error fails tsc.
export function misuse() {
  // @ts-expect-error not a model of the spec
  void client.submit({ model: 'vidgen-9', prompt: 'x' });
  // @ts-expect-error a task has no such field
  void task.nonexistent;
}
`;

const consumerTsconfig = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    lib: ['ES2023', 'DOM'],
    strict: true,
    allowJs: true,
    checkJs: true,
    noEmit: true,
    skipLibCheck: false,
    // Only for `process` in the script; the client's own types come from the tarball.
    typeRoots: [nodeTypes],
    types: ['node'],
  },
  include: ['check.mjs'],
};

it('packs into a tarball that installs, typechecks and runs outside the workspace', { timeout: 120_000 }, async () => {
  const packDir = join(work, 'pack');
  // `prepack` builds dist/ first.
  const [pnpmCommand, pnpmArgs] = pnpm();
  await run(pnpmCommand, [...pnpmArgs, 'pack', '--pack-destination', packDir], { cwd: packageDir });
  const [tarball] = readdirSync(packDir).filter((file) => file.endsWith('.tgz'));
  if (!tarball) throw new Error('pnpm pack made no tarball');

  const { stdout: listing } = await run('tar', ['-tzf', join(packDir, tarball)]);
  const files = listing.trim().split('\n').sort();
  expect(files).toContain('package/dist/index.js');
  expect(files).toContain('package/dist/index.d.ts');
  expect(files).toContain('package/dist/openapi.d.ts');
  expect(files).toContain('package/README.md');
  expect(files.filter((file) => !/^package\/(dist\/|README\.md$|package\.json$)/.test(file))).toEqual([]);

  // Browsers and edge runtimes: no Node built-in, no CommonJS in what ships.
  for (const file of readdirSync(join(packageDir, 'dist')).filter((name) => name.endsWith('.js'))) {
    expect(readFileSync(join(packageDir, 'dist', file), 'utf8'), file).not.toMatch(/from ['"]node:|require\(/);
  }

  await run('mkdir', ['-p', app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'vidgen-client-consumer', private: true, type: 'module' }));
  await run(npm, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', join(packDir, tarball)], { cwd: app });
  expect(existsSync(join(app, 'node_modules/@vidgen/client/dist/index.js'))).toBe(true);
  expect(existsSync(join(app, 'node_modules/openapi-fetch'))).toBe(true);
  expect(existsSync(join(app, 'node_modules/@vidgen/types'))).toBe(false);

  writeFileSync(join(app, 'check.mjs'), checkScript);
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(consumerTsconfig, null, 2));
  await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app }).catch((error: { stdout?: string }) => {
    throw new Error(`the consumer's typecheck failed:\n${error.stdout ?? String(error)}`);
  });

  const { stdout } = await run(process.execPath, ['check.mjs'], {
    cwd: app,
    env: { ...process.env, VIDGEN_BASE_URL: fixture.baseUrl, VIDGEN_API_KEY: fixture.apiKey },
  });
  const result = JSON.parse(stdout);
  expect(result.requestId).toMatch(/^gen_/);
  expect(['queued', 'processing', 'succeeded']).toContain(result.status);
  expect(result.notFound).toBe('404 not_found');
});

/** A CommonJS script: `require` goes through the package's exports to the ESM build. */
const requireScript = `'use strict';
const { createClient, VidgenError, isTerminal } = require('@vidgen/client');

const client = createClient({ baseUrl: process.env.VIDGEN_BASE_URL, apiKey: process.env.VIDGEN_API_KEY });
client
  .models()
  .then(async (models) => {
    let notFound = '';
    await client.get('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0').catch((error) => {
      if (error instanceof VidgenError) notFound = \`\${error.status} \${error.code}\`;
    });
    const resolved = require.resolve('@vidgen/client');
    console.log(JSON.stringify({ resolved, models: models.data.map((model) => model.id), notFound, terminal: isTerminal('succeeded') }));
  })
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  });
`;

/** A CommonJS TypeScript module (its package.json says `"type": "commonjs"`): tsc emits `require`. */
const cjsTypeScript = `import { createClient, VidgenError, type TaskSucceeded } from '@vidgen/client';

const client = createClient({ baseUrl: process.env.VIDGEN_BASE_URL ?? '', apiKey: process.env.VIDGEN_API_KEY ?? '' });
const url = (task: TaskSucceeded): string => task.output.url;
async function main(): Promise<void> {
  let notFound = '';
  try {
    await client.get('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0');
  } catch (error) {
    if (error instanceof VidgenError) notFound = \`\${error.status} \${error.code}\`;
  }
  console.log(JSON.stringify({ notFound, url: typeof url }));
}
void main();
`;

it('CommonJS: require() loads the installed package, and a CommonJS TypeScript project typechecks and runs', { timeout: 120_000 }, async () => {
  if (!existsSync(join(app, 'node_modules/@vidgen/client/package.json'))) throw new Error('the packed install of the previous test is missing');
  const cjs = join(work, 'app/cjs');
  await run('mkdir', ['-p', cjs]);
  writeFileSync(join(cjs, 'package.json'), JSON.stringify({ name: 'vidgen-client-cjs-consumer', private: true, type: 'commonjs' }));
  const env = { ...process.env, VIDGEN_BASE_URL: fixture.baseUrl, VIDGEN_API_KEY: fixture.apiKey };

  writeFileSync(join(cjs, 'check.cjs'), requireScript);
  const { stdout, stderr } = await run(process.execPath, ['check.cjs'], { cwd: cjs, env });
  const result = JSON.parse(stdout);
  expect(result.resolved).toBe(join(app, 'node_modules/@vidgen/client/dist/index.js'));
  expect(result.models.length).toBeGreaterThan(0);
  expect(result.notFound).toBe('404 not_found');
  expect(result.terminal).toBe(true);
  expect(stderr).not.toMatch(/ERR_|Error/);

  // `module: nodenext` (TypeScript 5.8+ knows Node 20.19+ can require ESM) and `commonjs`
  // (node10 resolution, which reads `types`): both typecheck the import, and the emitted `require` runs.
  writeFileSync(join(cjs, 'index.ts'), cjsTypeScript);
  for (const [module, moduleResolution] of [
    ['nodenext', 'nodenext'],
    ['commonjs', 'node10'],
  ] as const) {
    const outDir = `out-${module}`;
    const tsconfig = {
      compilerOptions: { target: 'ES2022', module, moduleResolution, strict: true, skipLibCheck: false, outDir, typeRoots: [nodeTypes], types: ['node'] },
      files: ['index.ts'],
    };
    writeFileSync(join(cjs, `tsconfig.${module}.json`), JSON.stringify(tsconfig, null, 2));
    await run(process.execPath, [tsc, '-p', `tsconfig.${module}.json`], { cwd: cjs }).catch((error: { stdout?: string }) => {
      throw new Error(`the CommonJS consumer's typecheck (module ${module}) failed:\n${error.stdout ?? String(error)}`);
    });
    const emitted = readFileSync(join(cjs, outDir, 'index.js'), 'utf8');
    expect(emitted, module).toContain('require("@vidgen/client")');
    const { stdout: out } = await run(process.execPath, [join(outDir, 'index.js')], { cwd: cjs, env });
    expect(JSON.parse(out), module).toEqual({ notFound: '404 not_found', url: 'function' });
  }
});
