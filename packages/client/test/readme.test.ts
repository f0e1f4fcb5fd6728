/**
 * Every ```ts block of the package README compiles under `--strict`, as a consumer's ESM module
 * (`module: NodeNext`, `"type": "module"`), with `@vidgen/client` resolved to this package's
 * source. One tsc run checks them all; each block is its own test, named by its README line.
 *
 * Fragments use names an earlier block or the reader's application defines: the prelude
 * declares exactly those (`vidgen`, the client the first example makes; `saveVideo` and
 * `markFailed`, the application's code the webhook examples call). Hono is the server's own
 * copy; express is not installed in the workspace, so a stub declares the little of
 * `@types/express` the README uses, typed as there (`req.body` is `any` in express's types too).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverDir } from './helpers.js';

const packageDir = resolve(import.meta.dirname, '..');
const readmePath = join(packageDir, 'README.md');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

interface Block {
  /** 1-based, in README order among the ```ts blocks. */
  index: number;
  /** README line of the block's first line of code. */
  line: number;
  code: string;
  file: string;
}

/** The ```ts (or ```typescript) blocks of a Markdown text, with the README line they start on. */
function tsBlocks(markdown: string): Omit<Block, 'file'>[] {
  const lines = markdown.split('\n');
  const blocks: Omit<Block, 'file'>[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(ts|typescript)\s*$/.test(lines[i]!)) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^```\s*$/.test(lines[end]!)) end++;
    if (end === lines.length) throw new Error(`README.md: the block opened at line ${i + 1} is never closed`);
    blocks.push({ index: blocks.length + 1, line: start + 1, code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return blocks;
}

const prelude = `import type { VidgenClient } from '@vidgen/client';

declare global {
  /** The client the first example makes: \`createClient({ baseUrl, apiKey })\`. */
  const vidgen: VidgenClient;
  /** The reader's application, called by the webhook examples. */
  function saveVideo(requestId: string, url: string): Promise<void>;
  function markFailed(requestId: string, code: string): Promise<void>;
}
`;

/** The part of @types/express (5.x) the README uses, with the same types. */
const expressStub = `import type { IncomingHttpHeaders } from 'node:http';

declare namespace express {
  interface Request {
    body: any;
    headers: IncomingHttpHeaders;
  }
  interface Response {
    status(code: number): this;
    send(body?: unknown): this;
    sendStatus(code: number): this;
  }
  type RequestHandler = (req: Request, res: Response, next: (error?: unknown) => void) => unknown;
  interface Express {
    post(path: string, ...handlers: RequestHandler[]): this;
  }
  function raw(options?: { type?: string | string[] }): RequestHandler;
}
declare function express(): express.Express;
export = express;
`;

/** A block with a type error: proves the check reports errors in the blocks' files at all. */
const canary = `import { createClient } from '@vidgen/client';
export const wrong: string = createClient;
`;

const blocks: Block[] = tsBlocks(readFileSync(readmePath, 'utf8')).map((block) => ({ ...block, file: `block-${block.index}-line-${block.line}.ts` }));
const work = mkdtempSync(join(tmpdir(), 'vidgen-client-readme-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** tsc's errors by file name (relative to `work`), README-independent. */
let diagnostics = new Map<string, string[]>();
let tscOutput = '';

beforeAll(async () => {
  writeFileSync(join(work, 'package.json'), JSON.stringify({ name: 'vidgen-client-readme', private: true, type: 'module' }));
  const tsconfig = {
    compilerOptions: {
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      lib: ['ES2023', 'DOM'],
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      typeRoots: [join(packageDir, 'node_modules/@types')],
      types: ['node'],
      paths: { '@vidgen/client': [join(packageDir, 'src/index.ts')] },
    },
    files: ['prelude.d.ts', 'canary.ts', ...blocks.map((block) => block.file)],
  };
  writeFileSync(join(work, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
  writeFileSync(join(work, 'prelude.d.ts'), prelude);
  writeFileSync(join(work, 'canary.ts'), canary);
  // `export {}` makes a fragment a module too: its own scope, and top-level `for await` allowed.
  for (const block of blocks) writeFileSync(join(work, block.file), `${block.code}\nexport {};\n`);

  const modules = join(work, 'node_modules');
  mkdirSync(join(modules, 'express'), { recursive: true });
  writeFileSync(join(modules, 'express/package.json'), JSON.stringify({ name: 'express', version: '5.0.0', types: 'index.d.ts' }));
  writeFileSync(join(modules, 'express/index.d.ts'), expressStub);
  const hono = join(serverDir, 'node_modules/hono');
  if (!existsSync(hono)) throw new Error(`hono is not installed at ${hono} (a dependency of @vidgen/server)`);
  symlinkSync(realpathSync(hono), join(modules, 'hono'), 'dir');

  tscOutput = await promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.json', '--pretty', 'false'], { cwd: work }).then(
    ({ stdout }) => stdout,
    (error: { stdout?: string; message: string }) => error.stdout || error.message,
  );
  diagnostics = new Map();
  let current: string[] | undefined;
  for (const line of tscOutput.split('\n')) {
    const match = /^(.+?)\((\d+),(\d+)\): error (TS\d+: .*)$/.exec(line);
    if (match) {
      const [, file, row, column, message] = match;
      current = diagnostics.get(file!) ?? [];
      diagnostics.set(file!, current);
      current.push(`${row}:${column} ${message}`);
    } else if (line.startsWith(' ') && current) current.push(line);
    else if (line.trim()) diagnostics.set('(tsc)', [...(diagnostics.get('(tsc)') ?? []), line]);
  }
}, 120_000);

describe('README.md: every ```ts block compiles under --strict', () => {
  it('has the blocks it documents with (four at least)', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(4);
  });

  it.each(blocks)('block $index (README.md line $line)', (block) => {
    const errors = (diagnostics.get(block.file) ?? []).map((error) =>
      // "row:column TSxxxx" of the temp file → the README line.
      error.replace(/^(\d+):(\d+)/, (_, row: string, column: string) => `README.md:${block.line + Number(row) - 1}:${column}`),
    );
    expect(errors, `README.md block ${block.index} (line ${block.line}) does not compile:\n${errors.join('\n')}\n\n${block.code}`).toEqual([]);
  });

  it('reports an error in a block (a canary with one)', () => {
    expect(diagnostics.get('canary.ts')?.join('\n')).toMatch(/TS2322/);
  });

  it('nothing else fails (the prelude, the stub, the client source)', () => {
    const others = [...diagnostics].filter(([file]) => file !== 'canary.ts' && !blocks.some((block) => block.file === file));
    expect(others, tscOutput).toEqual([]);
  });
});
