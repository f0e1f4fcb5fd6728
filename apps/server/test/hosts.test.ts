/**
 * D5's host rules apply to every spelling of a name or address that a
 * resolver treats as the same: trailing dots, case, percent-encoding, IDNA
 * (full-width), every IPv4 and IPv6 form of loopback and "this host". At
 * submission (400 naming the field, nothing charged) and at connect time.
 */
import { isIP, type LookupFunction } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hostForRules, isLocalhostName } from '../src/domain/address-policy.js';
import { explainHost } from '../src/domain/rules.js';
import { createMediaFetcher, refuseLiteralAddress } from '../src/media/fetcher.js';
import { createWebhookSender } from '../src/webhooks/sender.js';
import { harness, SUBMIT, testConfig, validSubmit } from './support.js';

/** Spellings of loopback names and addresses, and what the rules read each as. */
const LOOPBACK: [string, string][] = [
  ['LOCALHOST.', 'localhost'],
  ['localhost.', 'localhost'],
  ['sub.localhost.', 'sub.localhost'],
  ['Sub.LocalHost..', 'sub.localhost'],
  ['localhost%2E', 'localhost'],
  ['%6C%6F%63%61%6C%68%6F%73%74', 'localhost'],
  ['%6c%6f%63%61%6c%68%6f%73%74%2e', 'localhost'],
  ['ｌｏｃａｌｈｏｓｔ', 'localhost'], // full-width letters (IDNA maps them)
  ['localhost。', 'localhost'], // an ideographic full stop is a dot
  ['local\u00adhost', 'localhost'], // a soft hyphen is dropped
  ['localhost:8443', 'localhost'],
  ['2130706433', '127.0.0.1'],
  ['0x7f.1', '127.0.0.1'],
  ['0x7f000001', '127.0.0.1'],
  ['127.1', '127.0.0.1'],
  ['0177.0.0.1', '127.0.0.1'],
  ['127.0.0.1.', '127.0.0.1'],
  ['１２７．０．０．１', '127.0.0.1'], // full-width digits and dots
  ['①②⑦.0.0.1', '127.0.0.1'],
  ['127.255.255.254', '127.255.255.254'],
  ['[::1]', '::1'],
  ['[0:0:0:0:0:0:0:1]', '::1'],
  ['[::ffff:127.0.0.1]', '::ffff:7f00:1'],
  ['[::FFFF:7F00:1]', '::ffff:7f00:1'],
  ['[0:0:0:0:0:ffff:127.0.0.1]', '::ffff:7f00:1'],
];
/** Not loopback, not public: refused even where loopback is allowed. */
const UNSPECIFIED: [string, string][] = [
  ['0.0.0.0', '0.0.0.0'],
  ['0', '0.0.0.0'],
  ['0.0.0.0.', '0.0.0.0'],
  ['[::]', '::'],
  ['[::ffff:0.0.0.0]', '::ffff:0:0'],
  ['[::127.0.0.1]', '::7f00:1'], // IPv4-compatible: deprecated, not global unicast
  ['10.0.0.1.', '10.0.0.1'],
];

describe('hostForRules: what the host rules read a URL host as', () => {
  it.each([...LOOPBACK, ...UNSPECIFIED])('https://%s/ → %s', (host, expected) => {
    expect(hostForRules(new URL(`https://${host}/a.png`).hostname)).toBe(expected);
  });

  it('keeps names that only look alike apart', () => {
    for (const host of ['localhost.example.com', 'notlocalhost', 'localhost-1', 'mylocalhost.com.']) {
      expect(isLocalhostName(hostForRules(new URL(`https://${host}/`).hostname)), host).toBe(false);
    }
  });

  it('lower-cases a hostname that did not come from a URL', () => {
    expect(hostForRules('LocalHost..')).toBe('localhost');
    expect(hostForRules('[::1]')).toBe('::1');
  });
});

/** A URL with a non-ASCII host is not an RFC 3986 URI: the schema (format "uri") refuses it before the host rules do. */
const ascii = (host: string) => /^[\x21-\x7e]*$/.test(host);

describe('submission refuses every spelling of a host that is not public', () => {
  const spellings = [...LOOPBACK, ...UNSPECIFIED].map(([host]) => host);

  it.each(['mediaUrls', 'webhookUrl'] as const)('%s: 400 naming the field for each spelling, nothing charged', async (field) => {
    const h = harness();
    const { key, accountId } = await h.account(1_000_000);
    for (const host of spellings) {
      const body = field === 'mediaUrls' ? validSubmit({ mediaUrls: [`https://${host}/a.png`] }) : validSubmit({ webhookUrl: `https://${host}/hook` });
      const res = await h.request('POST', SUBMIT, { key, body });
      expect(res.status, host).toBe(400);
      expect(await res.json(), host).toMatchObject({
        success: false,
        error: { code: 'invalid_request', details: [{ field: field === 'mediaUrls' ? '/mediaUrls/0' : '/webhookUrl', message: expect.stringMatching(ascii(host) ? /which is not public$/ : /^must match format "uri"$|which is not public$/) }] },
      });
    }
    expect(await h.store.listTasks({ accountId, limit: 5 })).toEqual([]);
    expect((await h.store.listLedger(accountId)).filter((entry) => entry.kind === 'charge')).toEqual([]);
    expect(await h.store.auditBalance(accountId)).toEqual({ balance: 1_000_000, ledgerSum: 1_000_000 });
  });

  it('names the second of two references, the first being public', async () => {
    const h = harness();
    const { key } = await h.account();
    const res = await h.request('POST', SUBMIT, { key, body: validSubmit({ mediaUrls: ['https://cdn.example.com/a.png', 'https://LOCALHOST./b.png'] }) });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { details: [{ field: '/mediaUrls/1', message: 'has the host localhost, which is not public' }] } });
  });

  it('still accepts public names, including a fully qualified one with its trailing dot', async () => {
    const h = harness();
    const { key } = await h.account();
    for (const url of ['https://cdn.example.com./a.png', 'https://93.184.215.14./a.png', 'https://[2606:2800:220:1::1]/a.png']) {
      expect((await h.request('POST', SUBMIT, { key, body: validSubmit({ mediaUrls: [url], webhookUrl: url.replace('a.png', 'hook') }) })).status, url).toBe(202);
    }
  });

  it('with loopback allowed (VIDGEN_MEDIA_ALLOW_LOOPBACK / VIDGEN_WEBHOOK_ALLOW_LOOPBACK), accepts every loopback spelling, still not 0.0.0.0 or ::', async () => {
    const h = harness({ config: testConfig({ media: { allowLoopback: true }, webhooks: { allowLoopback: true } }) });
    const { key } = await h.account(100_000_000);
    for (const [host] of LOOPBACK.filter(([spelling]) => ascii(spelling))) {
      const res = await h.request('POST', SUBMIT, { key, body: validSubmit({ mediaUrls: [`https://${host}/a.png`], webhookUrl: `https://${host}/hook` }) });
      expect(res.status, host).toBe(202);
    }
    for (const [host] of UNSPECIFIED) {
      const res = await h.request('POST', SUBMIT, { key, body: validSubmit({ mediaUrls: [`https://${host}/a.png`], webhookUrl: `https://${host}/hook` }) });
      expect(res.status, host).toBe(400);
      expect(((await res.json()) as { error: { details: { field: string }[] } }).error.details.map((d) => d.field), host).toEqual(['/mediaUrls/0', '/webhookUrl']);
    }
    // Only the media switch: a loopback webhook is still refused.
    const mediaOnly = harness({ config: testConfig({ media: { allowLoopback: true } }) });
    const other = await mediaOnly.account();
    const res = await mediaOnly.request('POST', SUBMIT, { key: other.key, body: validSubmit({ mediaUrls: ['https://localhost./a.png'], webhookUrl: 'https://localhost./hook' }) });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { details: [{ field: '/webhookUrl' }] } });
  });

  it('explainHost reads the host as the resolver would, and names it', () => {
    expect(explainHost('https://LOCALHOST./a.png', false)).toBe('has the host localhost, which is not public');
    expect(explainHost('https://sub.localhost./a.png', false)).toBe('has the host sub.localhost, which is not public');
    expect(explainHost('https://0x7f.1/a.png', false)).toBe('has the address 127.0.0.1, which is not public');
    expect(explainHost('https://localhost./a.png', true)).toBeUndefined();
  });
});

describe('connect time: the fetcher and the webhook sender', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-hosts-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const asked: string[] = [];
  /** Resolves every spelling of localhost the way a resolver would: to loopback. */
  const lookup: LookupFunction = (hostname, options, callback) => {
    asked.push(hostname);
    const addresses = isLocalhostName(hostForRules(hostname)) ? ['127.0.0.1', '::1'] : [];
    setImmediate(() => {
      const all = addresses.map((address) => ({ address, family: isIP(address) }));
      if (!all.length) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '');
      if (options.all) callback(null, all);
      else callback(null, all[0]!.address, all[0]!.family);
    });
  };

  it.each([...LOOPBACK, ...UNSPECIFIED].filter(([, read]) => isIP(read)))('refuses the literal address https://%s/ (%s) before any connection', (host, read) => {
    expect(refuseLiteralAddress(new URL(`https://${host}/`).hostname, false)).toBe(`address ${read} is not public`);
  });

  it('refuses a loopback address with a trailing dot given as a hostname', () => {
    expect(refuseLiteralAddress('127.0.0.1.', false)).toBe('address 127.0.0.1 is not public');
    expect(refuseLiteralAddress('[::1]', true)).toBeUndefined();
  });

  it.each(['https://LOCALHOST./a.png', 'https://sub.localhost./a.png', 'https://ｌｏｃａｌｈｏｓｔ。/a.png'])('the fetcher refuses %s by what it resolves to', async (url) => {
    const result = await createMediaFetcher({ lookup }).fetch(url, 'image', join(dir, 'a.png'));
    expect(result).toEqual({ ok: false, reason: expect.stringMatching(/resolves to 127\.0\.0\.1, which is not public$/) });
  });

  it.each(['https://LOCALHOST./hook', 'https://0x7f.1/hook', 'https://[::ffff:127.0.0.1]/hook'])('the webhook sender refuses %s', async (url) => {
    const result = await createWebhookSender({ lookup }).send({ url, id: 'msg_1', body: '{}', secrets: ['whsec_' + Buffer.alloc(24, 1).toString('base64')] });
    expect(result).toMatchObject({ outcome: 'retry', error: expect.stringMatching(/not public$/) });
  });
});
