/**
 * Builds the server once before the tests: the process tests run the built JavaScript (`node
 * dist/main.js`), as production does, not the sources through tsx.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

export default function buildServer(): void {
  execFileSync(process.execPath, [join(import.meta.dirname, '../scripts/build.mjs'), '--no-check'], { stdio: ['ignore', 'ignore', 'inherit'] });
}
