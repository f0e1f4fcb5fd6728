/**
 * Webhook deliveries end to end in one process: the outbox written with the
 * terminal move, the worker's delivery lane, the real sender, and a real HTTPS
 * receiver on loopback whose signatures are checked with the `standardwebhooks`
 * library. The generation provider is scripted (instant); the clock is manual.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalOutputFiles } from '../src/files/storage.js';
import type { GenerationRequest, GenerationResult, Provider } from '../src/providers/provider.js';
import type { Worker } from '../src/queue/worker.js';
import { createDeliveryRunner } from '../src/webhooks/deliveries.js';
import { createWebhookSender } from '../src/webhooks/sender.js';
import { harness, silentLogger, SUBMIT, testConfig, validSubmit, type Harness, until, testWorker } from './support.js';
import { startHttpsFixture, type HttpsFixture } from './support/https-fixture.js';

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

type Reply = (req: IncomingMessage, res: ServerResponse) => void;

interface Setup extends Harness {
  worker: Worker;
  receiver: HttpsFixture;
  received: Received[];
  /** How the receiver answers its next requests, in order; the last one repeats. */
  replies: Reply[];
  key: string;
  accountId: string;
  secret: string;
}

const ok: Reply = (_req, res) => res.writeHead(200).end('ok');
const status =
  (code: number, headers: Record<string, string> = {}): Reply =>
  (_req, res) =>
    res.writeHead(code, headers).end();

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(provider: Provider, options: { timeoutMs?: number; scheduleMs?: number[] } = {}): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-webhooks-'));
  const received: Received[] = [];
  const replies: Reply[] = [ok];
  let served = 0;
  const receiver = await startHttpsFixture((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers as Record<string, string>, body });
      const reply = replies[Math.min(served++, replies.length - 1)]!;
      reply(req, res);
    });
  });
  const files = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('s') });
  let worker: Worker | undefined;
  // The receiver is on loopback: allowed, as a development deployment may (D8, D5).
  const h = harness({ files, wakeWorkers: () => worker?.wake(), config: testConfig({ webhooks: { allowLoopback: true } }) });
  worker = testWorker(h, {
    provider,
    files,
    workDir: join(dir, 'work'),
    concurrency: { local: 1, webhooks: 2 },
    outputTtlMs: 3600_000,
    deliveries: createDeliveryRunner({
      store: h.store,
      clock: h.clock,
      events: h.deps.events,
      logger: silentLogger,
      scheduleMs: options.scheduleMs ?? [1000, 1000, 1000, 1000],
      random: () => 0,
      // Signatures carry real time: receivers (and the library) check it against their clock.
      sender: createWebhookSender({ timeoutMs: options.timeoutMs ?? 5000, allowLoopback: true, ca: receiver.ca }),
    }),
  });
  const { key, accountId } = await h.account(10_000);
  const [secret] = await h.store.webhookSecrets(accountId, h.clock.now());
  worker.start();
  cleanups.push(async () => {
    await worker!.stop();
    await receiver.close();
    await h.store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { ...h, worker, receiver, received, replies, key, accountId, secret: secret! };
}

const instant: Provider = {
  name: 'instant',
  needsLocalMedia: false,
  async generate(request: GenerationRequest): Promise<GenerationResult> {
    writeFileSync(request.outputPath, 'mp4');
    return { ok: true };
  },
};
const failing: Provider = { ...instant, generate: async () => ({ ok: false, error: { code: 'provider_error', message: 'generation failed upstream' } }) };
const endless: Provider = {
  ...instant,
  generate: (request) => new Promise((resolve) => request.signal.addEventListener('abort', () => resolve({ ok: false, error: { code: 'internal_error', message: 'cancelled' } }))),
};

async function submit(s: Setup, path = '/hook') {
  const res = await s.request('POST', SUBMIT, { key: s.key, body: validSubmit({ webhookUrl: s.receiver.url(path) }) });
  expect(res.status).toBe(202);
  return ((await res.json()) as any).requestId as string;
}
const query = async (s: Setup, id: string) => (await (await s.request('GET', `${SUBMIT}/${id}`, { key: s.key })).json()) as any;
const deliveryOf = async (s: Setup, id: string) => (await s.store.getDeliveryForTask(id))!;

/** Drops the webhook summary: the one field the event's `data` cannot know. */
const withoutSummary = ({ webhook: _webhook, ...task }: any) => task;

describe('webhooks', () => {
  it.each([
    ['succeeded', instant, 'video.generation.succeeded'],
    ['failed', failing, 'video.generation.failed'],
  ] as const)('delivers one signed event for a %s task, its data equal to the query answer', async (final, provider, type) => {
    const s = await setup(provider);
    const id = await submit(s);
    await until(() => s.received.length === 1);
    await until(async () => (await deliveryOf(s, id)).status === 'delivered');
    const [event] = s.received;
    const verified = new Webhook(s.secret).verify(event!.body, event!.headers) as any;
    expect(verified.type).toBe(type);
    expect(verified.data.status).toBe(final);
    const task = await query(s, id);
    expect(verified.data).toEqual(withoutSummary(task));
    expect(task.webhook).toMatchObject({ status: 'delivered', attempts: 1 });
    expect(event!.headers['content-type']).toBe('application/json');
    s.clock.advance(10_000);
    await s.worker.idle();
    expect(s.received).toHaveLength(1);
  });

  it('delivers one event for a cancelled task', async () => {
    const s = await setup(endless);
    const id = await submit(s);
    await until(async () => (await query(s, id)).status === 'processing');
    await s.request('POST', `${SUBMIT}/${id}/cancel`, { key: s.key });
    await until(() => s.received.length === 1);
    const verified = new Webhook(s.secret).verify(s.received[0]!.body, s.received[0]!.headers) as any;
    expect(verified).toMatchObject({ type: 'video.generation.cancelled', data: { requestId: id, status: 'cancelled' } });
    await until(async () => (await deliveryOf(s, id)).status === 'delivered');
    expect(verified.data).toEqual(withoutSummary(await query(s, id)));
  });

  it('retries a failing receiver with the same webhook-id until it succeeds, once', async () => {
    const s = await setup(instant);
    s.replies.splice(0, s.replies.length, status(500), status(503), status(429), ok);
    const id = await submit(s);
    for (let attempt = 1; attempt <= 4; attempt++) {
      await until(() => s.received.length === attempt);
      if (attempt < 4) {
        await until(async () => (await deliveryOf(s, id)).attempts === attempt);
        s.clock.advance(1000);
      }
    }
    await until(async () => (await deliveryOf(s, id)).status === 'delivered');
    expect(new Set(s.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(s.received.map((r) => r.body)).toEqual(Array(4).fill(s.received[0]!.body));
    const attempts = await s.store.listDeliveryAttempts((await deliveryOf(s, id)).id);
    expect(attempts.map((a) => a.statusCode)).toEqual([500, 503, 429, 200]);
    expect((await query(s, id)).webhook).toMatchObject({ status: 'delivered', attempts: 4 });
  });

  it('stops for good on 410 Gone', async () => {
    const s = await setup(instant);
    s.replies.splice(0, s.replies.length, status(410));
    const id = await submit(s);
    await until(async () => (await deliveryOf(s, id))?.status === 'failed');
    s.clock.advance(60_000);
    await s.worker.idle();
    expect(s.received).toHaveLength(1);
    expect((await query(s, id)).webhook).toMatchObject({ status: 'failed', attempts: 1 });
  });

  it('sends a failed delivery again when an operator redelivers it', async () => {
    const s = await setup(instant);
    s.replies.splice(0, s.replies.length, status(410), ok);
    const id = await submit(s);
    await until(async () => (await deliveryOf(s, id))?.status === 'failed');
    await s.store.redeliver({ deliveryId: (await deliveryOf(s, id)).id, now: s.clock.now() });
    s.worker.wake();
    await until(async () => (await deliveryOf(s, id)).status === 'delivered');
    expect(s.received.map((r) => r.headers['webhook-id'])).toEqual(Array(2).fill(s.received[0]!.headers['webhook-id']));
  });

  it('does not follow a redirect', async () => {
    const s = await setup(instant);
    s.replies.splice(0, s.replies.length, status(302, { Location: '/elsewhere' }), ok);
    const id = await submit(s);
    await until(async () => (await deliveryOf(s, id))?.attempts === 1);
    expect(s.received.map((r) => r.path)).toEqual(['/hook']);
    expect((await deliveryOf(s, id)).status).toBe('pending');
    expect((await s.store.listDeliveryAttempts((await deliveryOf(s, id)).id))[0]!.statusCode).toBe(302);
  });

  it('cuts a receiver that hangs at the timeout and tries again later', async () => {
    const s = await setup(instant, { timeoutMs: 300 });
    s.replies.splice(0, s.replies.length, () => {}, ok);
    const id = await submit(s);
    await until(async () => (await deliveryOf(s, id))?.attempts === 1);
    const [attempt] = await s.store.listDeliveryAttempts((await deliveryOf(s, id)).id);
    expect(attempt!.error).toMatch(/time/i);
    s.clock.advance(1000);
    await until(async () => (await deliveryOf(s, id)).status === 'delivered');
  });

  it('gives up when the schedule runs out', async () => {
    const s = await setup(instant, { scheduleMs: [1000] });
    s.replies.splice(0, s.replies.length, status(500));
    const id = await submit(s);
    await until(async () => (await deliveryOf(s, id))?.attempts === 1);
    s.clock.advance(1000);
    await until(async () => (await deliveryOf(s, id)).status === 'failed');
    expect(s.received).toHaveLength(2);
  });

  it('signs with both secrets during a rotation', async () => {
    const s = await setup(instant);
    const { newWebhookSecret } = await import('../src/webhooks/signing.js');
    const next = newWebhookSecret();
    await s.store.rotateWebhookSecret({ accountId: s.accountId, secret: next, previousValidUntil: new Date(s.clock.now().getTime() + 3600_000) });
    await submit(s);
    await until(() => s.received.length === 1);
    const [event] = s.received;
    expect(event!.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(() => new Webhook(s.secret).verify(event!.body, event!.headers)).not.toThrow();
    expect(() => new Webhook(next).verify(event!.body, event!.headers)).not.toThrow();
  });

  it('sends nothing for a task without a webhookUrl', async () => {
    const s = await setup(instant);
    const res = await s.request('POST', SUBMIT, { key: s.key, body: validSubmit() });
    const id = ((await res.json()) as any).requestId;
    await until(async () => (await query(s, id)).status === 'succeeded');
    expect(await s.store.getDeliveryForTask(id)).toBeUndefined();
    expect((await query(s, id)).webhook).toBeUndefined();
  });
});
