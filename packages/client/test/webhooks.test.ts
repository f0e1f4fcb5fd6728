/** verifyWebhook against signatures made by the `standardwebhooks` reference library. */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { verifyWebhook, WebhookVerificationError, type VideoGenerationEvent } from '../src/index.js';
import { taskIn } from './helpers.js';

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const secret = newSecret();
const otherSecret = newSecret();
const id = 'msg_01JD6ZC3V2E8H5K9P1S4W7Y0A3';
const signedAt = new Date('2026-03-01T12:00:00Z');
const timestamp = String(signedAt.getTime() / 1000);
const { webhook: _summary, ...data } = taskIn('succeeded') as ReturnType<typeof taskIn> & { webhook?: unknown };
const event = { type: 'video.generation.succeeded', timestamp: signedAt.toISOString(), data } as VideoGenerationEvent;
const body = JSON.stringify(event);

const sign = (withSecret: string, payload = body) => new Webhook(withSecret).sign(id, signedAt, payload);
const headersFor = (signature: string) => ({ 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature });
const at = { now: signedAt };

async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WebhookVerificationError);
  return (error as Error).message;
}

describe('verifyWebhook', () => {
  it('accepts a valid signature and returns the typed event (string body, header record)', async () => {
    const headers = headersFor(sign(secret));
    // The reference library agrees that this vector is valid (at its own clock, so timestamp now).
    const verified = await verifyWebhook(body, headers, secret, at);
    expect(verified).toEqual(event);
    if (verified.type === 'video.generation.succeeded') expect(verified.data.output.url).toBeTruthy();
    else throw new Error('the event is the succeeded one');
  });

  it('accepts raw bytes and a Headers object with any capitalization', async () => {
    const headers = new Headers({ 'Webhook-Id': id, 'Webhook-Timestamp': timestamp, 'Webhook-Signature': sign(secret) });
    expect(await verifyWebhook(new TextEncoder().encode(body), headers, secret, at)).toEqual(event);
    const express = { 'Webhook-Id': id, 'WEBHOOK-TIMESTAMP': timestamp, 'webhook-signature': [sign(secret)] };
    expect(await verifyWebhook(Buffer.from(body), express, secret, at)).toEqual(event);
  });

  it('agrees with the reference library on a vector signed now', async () => {
    const now = new Date();
    const signature = new Webhook(secret).sign(id, now, body);
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': signature };
    expect(new Webhook(secret).verify(body, headers)).toEqual(event);
    expect(await verifyWebhook(body, headers, secret)).toEqual(event);
  });

  it('refuses a tampered body', async () => {
    const tampered = body.replace('"succeeded"', '"failed"');
    expect(await refusal(verifyWebhook(tampered, headersFor(sign(secret)), secret, at))).toBe('no matching signature');
  });

  it('refuses a signature made with another secret', async () => {
    expect(await refusal(verifyWebhook(body, headersFor(sign(otherSecret)), secret, at))).toBe('no matching signature');
  });

  it('accepts two signatures when one matches (a rotation), with one secret or a list of them', async () => {
    const both = `${sign(otherSecret)} ${sign(secret)}`;
    expect(await verifyWebhook(body, headersFor(both), secret, at)).toEqual(event);
    expect(await verifyWebhook(body, headersFor(sign(secret)), [otherSecret, secret], at)).toEqual(event);
    expect(await refusal(verifyWebhook(body, headersFor(`${sign(otherSecret)} v1,AAAA`), secret, at))).toBe('no matching signature');
  });

  it('ignores entries of other versions', async () => {
    const v2 = sign(secret).replace(/^v1,/, 'v2,');
    expect(await refusal(verifyWebhook(body, headersFor(v2), secret, at))).toBe('no matching signature');
  });

  it('refuses a timestamp too old or too new, and accepts one at the edge of the tolerance', async () => {
    const headers = headersFor(sign(secret));
    const seconds = (s: number) => signedAt.getTime() + s * 1000;
    expect(await refusal(verifyWebhook(body, headers, secret, { now: seconds(301) }))).toBe('message timestamp too old');
    expect(await refusal(verifyWebhook(body, headers, secret, { now: seconds(-301) }))).toBe('message timestamp too new');
    expect(await verifyWebhook(body, headers, secret, { now: seconds(300) })).toEqual(event);
    expect(await verifyWebhook(body, headers, secret, { now: seconds(-300) })).toEqual(event);
    expect(await refusal(verifyWebhook(body, headers, secret, { now: seconds(61), toleranceSeconds: 60 }))).toBe('message timestamp too old');
  });

  it('refuses a request with a header missing', async () => {
    const complete = headersFor(sign(secret));
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
      const { [name]: _missing, ...rest } = complete;
      expect(await refusal(verifyWebhook(body, rest, secret, at))).toBe(`missing ${name} header`);
    }
    expect(await refusal(verifyWebhook(body, { ...complete, 'webhook-timestamp': 'soon' }, secret, at))).toBe('invalid webhook-timestamp header');
  });

  it('refuses a different webhook-id than the one signed (the id is part of the signed content)', async () => {
    const headers = { ...headersFor(sign(secret)), 'webhook-id': 'msg_01JD6ZC3V2E8H5K9P1S4W7Y0A4' };
    expect(await refusal(verifyWebhook(body, headers, secret, at))).toBe('no matching signature');
  });
});
