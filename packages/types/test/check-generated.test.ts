import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const specDir = resolve(root, '../../spec');
const check = (...args: string[]) =>
  spawnSync(process.execPath, [join(root, 'scripts/check-generated.mjs'), ...args], { encoding: 'utf8' });

describe('check:generated', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'vidgen-drift-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('passes when the committed types match the current bundle', () => {
    const result = check();
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('fails when the spec changed without regenerating', () => {
    // Edit a copy of the spec the way a careless change would: a new request field.
    const yaml = readFileSync(join(specDir, 'openapi.yaml'), 'utf8');
    const edited = yaml.replace(
      '        webhookUrl:\n          $ref: \'#/components/schemas/WebhookUrl\'\n',
      "        webhookUrl:\n          $ref: '#/components/schemas/WebhookUrl'\n        seed:\n          type: integer\n",
    );
    expect(edited).not.toBe(yaml);
    writeFileSync(join(scratch, 'openapi.yaml'), edited);
    copyFileSync(join(specDir, 'redocly.yaml'), join(scratch, 'redocly.yaml'));
    const bundle = join(scratch, 'openapi.json');
    const bundled = spawnSync(
      join(specDir, 'node_modules/.bin/redocly'),
      ['bundle', join(scratch, 'openapi.yaml'), '--output', bundle, '--ext', 'json'],
      { encoding: 'utf8', cwd: scratch },
    );
    expect(bundled.status).toBe(0);

    const result = check('--spec', bundle);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/out of date/);
    expect(result.stderr).toMatch(/pnpm --filter @vidgen\/types generate/);
  });

  it('fails when the generated file was edited by hand', () => {
    const copy = join(scratch, 'openapi.ts');
    writeFileSync(copy, readFileSync(join(root, 'src/openapi.ts'), 'utf8').replace('success: true;', 'success: boolean;'));
    const result = check('--generated', copy);
    expect(result.status).toBe(1);
  });
});
