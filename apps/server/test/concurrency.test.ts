/** Charges and idempotency under concurrent HTTP requests to a real server on loopback. */
import { serve, type ServerType } from '@hono/node-server';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { harness, SUBMIT, validSubmit, type Harness } from './support.js';

const PRICE = 12; // vidgen-2.0-fast, 480p, 4 s at 3 credits/s

let dir: string;
let h: Harness;
let server: ServerType;
let baseUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-concurrency-'));
  h = harness({}, join(dir, 'vidgen.db'));
  server = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await h.store.close();
  rmSync(dir, { recursive: true, force: true });
});

const submit = (key: string, headers: Record<string, string> = {}) =>
  fetch(`${baseUrl}${SUBMIT}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(validSubmit()),
  });

describe('under concurrency', () => {
  it('accepts exactly as many tasks as the credits pay for (4×N submits for N)', async () => {
    const N = 25;
    const { key, accountId } = await h.account(N * PRICE);
    const replies = await Promise.all(Array.from({ length: 4 * N }, () => submit(key)));
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 202)).toHaveLength(N);
    expect(statuses.filter((s) => s === 402)).toHaveLength(3 * N);
    const refused = (await replies.find((r) => r.status === 402)!.json()) as any;
    expect(refused.error).toMatchObject({ code: 'insufficient_credits', details: [{ field: 'credits.required', value: PRICE }, { field: 'credits.available', value: 0 }] });
    expect(await h.store.auditBalance(accountId)).toEqual({ balance: 0, ledgerSum: 0 });
    const ledger = await h.store.listLedger(accountId);
    expect(ledger.filter((e) => e.kind === 'charge')).toHaveLength(N);
    expect((await h.store.listTasks({ accountId, limit: 1000 })).length).toBe(N);
  });

  it('creates one task and one charge for 20 concurrent submits with one Idempotency-Key', async () => {
    const { key, accountId } = await h.account(1000);
    const replies = await Promise.all(Array.from({ length: 20 }, () => submit(key, { 'Idempotency-Key': 'order-1138' })));
    const bodies = (await Promise.all(replies.map((r) => r.json()))) as any[];
    const accepted = bodies.filter((_, i) => replies[i]!.status === 202);
    const overlapped = replies.filter((r) => r.status === 409);
    expect(accepted.length + overlapped.length).toBe(20);
    expect(new Set(accepted.map((b) => b.requestId)).size).toBe(1);
    expect(replies.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(accepted.length - 1);
    expect((await h.store.listTasks({ accountId, limit: 100 })).length).toBe(1);
    expect((await h.store.listLedger(accountId)).filter((e) => e.kind === 'charge')).toHaveLength(1);
    expect(await h.store.auditBalance(accountId)).toEqual({ balance: 1000 - PRICE, ledgerSum: 1000 - PRICE });
  });

  it('refunds once when the same task is cancelled by many requests at once', async () => {
    const { key, accountId } = await h.account(100);
    const { requestId } = (await (await submit(key)).json()) as any;
    const replies = await Promise.all(
      Array.from({ length: 10 }, () => fetch(`${baseUrl}${SUBMIT}/${requestId}/cancel`, { method: 'POST', headers: { Authorization: `Bearer ${key}` } })),
    );
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect((await h.store.listLedger(accountId)).filter((e) => e.kind === 'refund')).toHaveLength(1);
    expect(await h.store.auditBalance(accountId)).toEqual({ balance: 100, ledgerSum: 100 });
  });
});
