import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import type { components } from '@vidgen/types';

export const serverDir = resolve(import.meta.dirname, '../../../apps/server');
export const tsx = resolve(serverDir, 'node_modules/.bin/tsx');

export function serverEnv(dataDir: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    VIDGEN_DATA_DIR: dataDir,
    VIDGEN_DEV_BOOTSTRAP: 'false',
    VIDGEN_LOG_LEVEL: 'warn',
    PORT: '0',
    HOST: '127.0.0.1',
    // The suite submits faster than an application would: limits stay on, set above its pace.
    VIDGEN_RATE_LIMIT_SUBMITS: '1000',
    VIDGEN_RATE_LIMIT_READS: '10000',
    VIDGEN_MAX_ACTIVE_TASKS: '1000',
  };
}

/** The server's operator CLI on the suite's data dir, with `--json`. */
export async function cli(dataDir: string, ...args: string[]): Promise<any> {
  const { stdout } = await promisify(execFile)(tsx, ['src/cli/main.ts', ...args, '--json'], { cwd: serverDir, env: serverEnv(dataDir) });
  return JSON.parse(stdout);
}

/** A fetch that records every request it passes on. */
export function countingFetch(inner: (request: Request) => Promise<Response> = (request) => fetch(request)) {
  const requests: Request[] = [];
  const counted = (request: Request) => {
    requests.push(request.clone());
    return inner(request);
  };
  return { fetch: counted, requests };
}

type Task = components['schemas']['Task'];

/** A task resource in a given state, for stubs (fields as the service sends them). */
export function taskIn(status: Task['status'], requestId = 'gen_01JD6Z8K4T9QW3M5R7X2B6C8N0'): Task {
  const base = {
    success: true as const,
    requestId,
    model: 'vidgen-2.0' as const,
    prompt: 'a stub',
    duration: 20,
    aspectRatio: '16:9' as const,
    resolution: '480p' as const,
    mode: 'text_to_video' as const,
    mediaUrls: [],
    metadata: null,
    creditsCharged: 100,
    creditsRefunded: status === 'failed' || status === 'cancelled' ? 100 : 0,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
  };
  switch (status) {
    case 'queued':
    case 'processing':
      return { ...base, status, output: null, error: null, completedAt: null };
    case 'succeeded':
      return { ...base, status, output: { type: 'video', url: 'http://127.0.0.1/files/x.mp4', expiresAt: '2026-01-08T00:00:00.000Z' }, error: null, completedAt: base.updatedAt };
    case 'failed':
      return { ...base, status, output: null, error: { code: 'provider_error', message: 'the stub failed it' }, completedAt: base.updatedAt };
    case 'cancelled':
      return { ...base, status, output: null, error: null, completedAt: base.updatedAt };
  }
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', 'X-Correlation-Id': 'corr-stub', ...headers } });
}
