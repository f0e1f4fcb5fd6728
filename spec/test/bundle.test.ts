import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const specDir = resolve(import.meta.dirname, '..');
const redocly = resolve(specDir, 'node_modules/.bin/redocly');
const bundle = JSON.parse(readFileSync(resolve(specDir, 'dist/openapi.json'), 'utf8'));

describe('the bundled document', () => {
  it('is OpenAPI 3.1 with every $ref local', () => {
    expect(bundle.openapi).toBe('3.1.0');
    const external = JSON.stringify(bundle).match(/"\$ref":"(?!#)[^"]*"/g);
    expect(external).toBeNull();
  });

  it('validates as OpenAPI 3.1 (redocly lint of the bundle itself)', () => {
    // operation-4xx-response is waived for the five service endpoints in the source's
    // ignore file, which names the source; the bundle gets the same waiver here.
    const lint = spawnSync(redocly, ['lint', 'dist/openapi.json', '--skip-rule', 'operation-4xx-response', '--format', 'stylish'], {
      cwd: specDir,
      encoding: 'utf8',
    });
    expect(`${lint.stdout}${lint.stderr}`).toMatch(/Your API description is valid/);
    expect(lint.status).toBe(0);
  });

  it('lints the source with zero errors and zero warnings', () => {
    const lint = spawnSync(redocly, ['lint', 'openapi.yaml', '--format', 'json'], { cwd: specDir, encoding: 'utf8' });
    const report = JSON.parse(lint.stdout) as { totals: { errors: number; warnings: number }; problems: unknown[] };
    expect(report.problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(lint.status).toBe(0);
  });

  it('names the operations every consumer relies on', () => {
    const ids = Object.values(bundle.paths as Record<string, Record<string, { operationId?: string }>>).flatMap((item) =>
      Object.values(item).flatMap((op) => (op && typeof op === 'object' && op.operationId ? [op.operationId] : [])),
    );
    expect(ids.sort()).toEqual(
      [
        'cancelGeneration',
        'createApiKey',
        'getAccount',
        'getConsole',
        'getGeneration',
        'getHealth',
        'getMetrics',
        'getOpenApiDocument',
        'getOutputFile',
        'getReadiness',
        'getReference',
        'getUsage',
        'getWebhookDelivery',
        'getWebhookSecret',
        'listApiKeys',
        'listGenerations',
        'listLedgerEntries',
        'listModels',
        'listWebhookDeliveries',
        'receiveUpstreamCallback',
        'redeliverWebhook',
        'revokeApiKey',
        'rotateWebhookSecret',
        'submitGeneration',
      ].sort(),
    );
    expect(Object.keys(bundle.webhooks)).toEqual(['videoGenerationCompleted']);
  });
});
