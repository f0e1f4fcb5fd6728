/**
 * The reference-media fetcher against real HTTPS servers on loopback. No test touches the real
 * network: every host name is answered by an injected lookup, and every address that is not the
 * loopback fixture is refused before a connection to it is attempted.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import net, { isIP, type AddressInfo, type LookupFunction } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { isLoopback, isPublicUnicast } from '../src/domain/address-policy.js';
import { createMediaFetcher, type FetchResult, type MediaFetcherOptions } from '../src/media/fetcher.js';
import { hasMagicOf } from '../src/media/magic.js';
import { startHttpsFixture, type HttpsFixture } from './support/https-fixture.js';

const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(100, 1)]);
const MP4 = Buffer.concat([Buffer.from('00000018', 'hex'), Buffer.from('ftypisom'), Buffer.alloc(200, 2)]);
const WAV = Buffer.concat([Buffer.from('RIFF'), Buffer.from([36, 0, 0, 0]), Buffer.from('WAVEfmt '), Buffer.alloc(100, 3)]);

/** The only source of addresses in these tests: a fixed table, answering asynchronously like DNS. */
function tableLookup(table: Record<string, string[]>) {
  const asked: string[] = [];
  const lookup: LookupFunction = (hostname, options, callback) => {
    asked.push(hostname);
    setImmediate(() => {
      const addresses = (table[hostname] ?? []).map((address) => ({ address, family: isIP(address) }));
      const [first] = addresses;
      if (!first) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '');
      if (options.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
  return { lookup, asked };
}

describe('isPublicUnicast', () => {
  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '2606:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808', // NAT64 of 8.8.8.8
    '2002:808:808::1', // 6to4 of 8.8.8.8
    '2001:0:4136:e378:8000:63bf:f7f7:f7f7', // Teredo, server 65.54.227.120, client 8.8.8.8
  ])('%s is public', (address) => expect(isPublicUnicast(address)).toBe(true));

  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.1.2.3', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local (cloud metadata)'],
    ['100.64.0.1', 'CGNAT'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['0.0.0.0', 'unspecified'],
    ['240.0.0.1', 'reserved'],
    ['198.18.0.1', 'benchmarking'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.1', 'documentation'],
    ['203.0.113.1', 'documentation'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'link-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001:2::1', 'benchmarking'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:0:a00:1', 'IPv4-translated private'],
    ['64:ff9b::a00:1', 'NAT64 of 10.0.0.1'],
    ['64:ff9b:1::808:808', 'local-use NAT64'],
    ['2002:a00:1::1', '6to4 of 10.0.0.1'],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', 'Teredo with client 10.0.0.1'],
    ['::7f00:1', 'IPv4-compatible (deprecated)'],
    ['4000::1', 'outside 2000::/3'],
    ['0177.0.0.1', 'not canonical'],
    ['2130706433', 'not canonical'],
    ['localhost', 'not an address'],
    ['', 'empty'],
  ])('%s is refused (%s)', (address) => expect(isPublicUnicast(address)).toBe(false));

  it('isLoopback recognises loopback in both families and mapped form only', () => {
    expect(['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1'].map(isLoopback)).toEqual([true, true, true, true]);
    expect(['10.0.0.1', '8.8.8.8', 'fe80::1', '0177.0.0.1'].map(isLoopback)).toEqual([false, false, false, false]);
  });
});

describe('hasMagicOf', () => {
  const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));
  it.each([
    ['image', 'PNG', PNG],
    ['image', 'JPEG', bytes([0xff, 0xd8, 0xff, 0xe0], 'xxxxxxxx')],
    ['image', 'GIF', bytes('GIF89a......')],
    ['image', 'WebP', bytes('RIFF', [0, 0, 0, 0], 'WEBPVP8 ')],
    ['image', 'BMP', bytes('BM', [0, 0, 0, 0, 0, 0, 0, 0, 0, 0])],
    ['video', 'MP4', MP4],
    ['video', 'QuickTime moov', bytes([0, 0, 0, 8], 'moov....')],
    ['video', 'QuickTime mdat', bytes([0, 0, 0, 8], 'mdat....')],
    ['audio', 'MP3 with ID3', bytes('ID3', [4, 0, 0, 0, 0, 0, 0, 0, 0])],
    ['audio', 'MP3 frame sync', bytes([0xff, 0xfb, 0x90, 0x64], '........')],
    ['audio', 'WAV', WAV],
  ] as const)('accepts %s for %s', (kind, _name, head) => expect(hasMagicOf(kind, head)).toBe(true));

  it.each([
    ['image', MP4],
    ['image', bytes('<!doctype html>')],
    ['video', PNG],
    ['video', WAV],
    ['audio', PNG], // JPEG/PNG bytes must not pass as an MPEG frame sync
    ['audio', bytes([0xff, 0xd8, 0xff, 0xe0], 'xxxxxxxx')],
    ['audio', bytes('RIFF', [0, 0, 0, 0], 'WEBPVP8 ')],
    ['image', Buffer.alloc(0)],
  ] as const)('refuses a %s that is something else (#%#)', (kind, head) => expect(hasMagicOf(kind, head)).toBe(false));
});

describe('createMediaFetcher', () => {
  let fixture: HttpsFixture;
  let onHang: (() => void) | undefined;
  let dir: string;
  const dns = tableLookup({ localhost: ['127.0.0.1'], 'internal.example': ['10.0.0.1'] });

  beforeAll(async () => {
    fixture = await startHttpsFixture((req, res) => {
      const path = req.url ?? '/';
      const redirect = /^\/r\/(\d+)\/a\.png$/.exec(path);
      if (redirect) {
        const left = Number(redirect[1]);
        if (left === 0) return res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
        return res.writeHead(302, { location: `/r/${left - 1}/a.png` }).end();
      }
      switch (path) {
        case '/a.png':
          return res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
        case '/clip.mp4':
          return res.writeHead(200, { 'content-type': 'video/mp4' }).end(MP4);
        case '/sound.wav':
          return res.writeHead(200, { 'content-type': 'audio/wav' }).end(WAV);
        case '/page.png':
          return res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>not a picture</title>');
        case '/big.png':
          return res.writeHead(200).end(Buffer.concat([PNG, Buffer.alloc(4096)]));
        case '/declared-big.png':
          res.writeHead(200, { 'content-length': 1_000_000 }).write(PNG);
          return; // never finishes: only the declared length can end this quickly
        case '/big-chunked.png':
          res.writeHead(200); // no Content-Length: the cap must be enforced while streaming
          for (let i = 0; i < 8; i++) res.write(i === 0 ? PNG : Buffer.alloc(512));
          return res.end();
        case '/hang.png':
          return onHang?.(); // holds the request open: never answers
        case '/to-http.png':
          return res.writeHead(301, { location: fixture.url('/a.png').replace('https:', 'http:') }).end();
        case '/to-private.png':
          return res.writeHead(307, { location: 'https://10.0.0.1/a.png' }).end();
        case '/to-internal.png':
          return res.writeHead(308, { location: 'https://internal.example/a.png' }).end();
        default:
          return res.writeHead(404).end('no such file');
      }
    });
  });
  afterAll(() => fixture.close());
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'media-fetcher-'));
    onHang = undefined;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await rm(dir, { recursive: true, force: true });
  });

  /** The test-only configuration that may reach the loopback fixture. */
  const loopbackFetcher = (options: MediaFetcherOptions = {}) =>
    createMediaFetcher({ allowLoopback: true, ca: fixture.ca, lookup: dns.lookup, ...options });

  const expectFailure = async (result: FetchResult, reason: RegExp) => {
    expect(result).toEqual({ ok: false, reason: expect.stringMatching(reason) });
    expect(await readdir(dir)).toEqual([]); // no destination, no partial temp file
  };

  describe('downloads and sniffs', () => {
    it.each([
      ['/a.png', 'image', PNG, 'image/png'],
      ['/clip.mp4', 'video', MP4, 'video/mp4'],
      ['/sound.wav', 'audio', WAV, 'audio/wav'],
    ] as const)('%s as %s', async (path, kind, body, contentType) => {
      const destination = join(dir, `reference${path.slice(path.lastIndexOf('.'))}`);
      const result = await loopbackFetcher().fetch(fixture.url(path), kind, destination);
      expect(result).toEqual({ ok: true, bytes: body.length, contentType });
      expect(await readFile(destination)).toEqual(body);
      expect(await readdir(dir)).toHaveLength(1);
    });

    it('reaches a literal loopback address when loopback is allowed', async () => {
      const result = await loopbackFetcher().fetch(fixture.url('/a.png', '127.0.0.1'), 'image', join(dir, 'a.png'));
      expect(result.ok).toBe(true);
    });
  });

  describe('refuses a body that is not what it claims', () => {
    it('HTML served as .png', async () => {
      const url = fixture.url('/page.png');
      const result = await loopbackFetcher().fetch(url, 'image', join(dir, 'a.png'));
      await expectFailure(result, new RegExp(`^${url}: is not an image file$`));
    });

    it('a PNG where a video was expected', async () => {
      await expectFailure(await loopbackFetcher().fetch(fixture.url('/a.png'), 'video', join(dir, 'a.mp4')), /is not a video file$/);
    });

    it('a body over the cap', async () => {
      const result = await loopbackFetcher({ maxBytes: { image: 1024 } }).fetch(fixture.url('/big.png'), 'image', join(dir, 'a.png'));
      await expectFailure(result, /is larger than the 1024 bytes allowed for image$/);
    });

    it('a declared Content-Length over the cap, before reading the body', async () => {
      const fetcher = loopbackFetcher({ maxBytes: { image: 1024 }, totalTimeoutMs: 5_000 });
      await expectFailure(await fetcher.fetch(fixture.url('/declared-big.png'), 'image', join(dir, 'a.png')), /is larger than the 1024 bytes allowed for image$/);
    });

    it('a streamed body that grows over the cap', async () => {
      const result = await loopbackFetcher({ maxBytes: { image: 1024 } }).fetch(fixture.url('/big-chunked.png'), 'image', join(dir, 'a.png'));
      await expectFailure(result, /is larger than the 1024 bytes allowed for image$/);
    });

    it('a 404', async () => {
      await expectFailure(await loopbackFetcher().fetch(fixture.url('/missing.png'), 'image', join(dir, 'a.png')), /server answered HTTP 404$/);
    });
  });

  describe('timeouts and cancellation', () => {
    it('gives up on a server that accepts the request and never answers', async () => {
      const result = await loopbackFetcher({ totalTimeoutMs: 300 }).fetch(fixture.url('/hang.png'), 'image', join(dir, 'a.png'));
      await expectFailure(result, /timed out after 300 ms$/);
    });

    it('gives up on a server that holds the socket without a TLS handshake', async () => {
      const held: net.Socket[] = [];
      const silent = net.createServer((socket) => held.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = silent.address() as AddressInfo;
        const result = await loopbackFetcher({ connectTimeoutMs: 200 }).fetch(`https://localhost:${port}/a.png`, 'image', join(dir, 'a.png'));
        await expectFailure(result, /no connection within 200 ms$/);
      } finally {
        held.forEach((socket) => socket.destroy());
        await new Promise((resolve) => silent.close(resolve));
      }
    });

    it('stops when the caller aborts', async () => {
      const controller = new AbortController();
      onHang = () => controller.abort();
      const result = await loopbackFetcher().fetch(fixture.url('/hang.png'), 'image', join(dir, 'a.png'), controller.signal);
      await expectFailure(result, /: cancelled$/);
    });
  });

  describe('redirects', () => {
    it('follows 3, checking each hop', async () => {
      const result = await loopbackFetcher().fetch(fixture.url('/r/3/a.png'), 'image', join(dir, 'a.png'));
      expect(result).toMatchObject({ ok: true, bytes: PNG.length });
    });

    it('refuses a 4th', async () => {
      await expectFailure(await loopbackFetcher().fetch(fixture.url('/r/4/a.png'), 'image', join(dir, 'a.png')), /more than 3 redirects$/);
    });

    it('refuses a redirect to http://', async () => {
      const result = await loopbackFetcher().fetch(fixture.url('/to-http.png'), 'image', join(dir, 'a.png'));
      await expectFailure(result, /redirect to http:\/\/localhost:\d+\/a\.png refused: must be an https:\/\/ URL$/);
    });

    it('refuses a redirect to a private address, even with loopback allowed', async () => {
      const connect = vi.spyOn(net.Socket.prototype, 'connect');
      const result = await loopbackFetcher().fetch(fixture.url('/to-private.png'), 'image', join(dir, 'a.png'));
      await expectFailure(result, /redirect to https:\/\/10\.0\.0\.1\/a\.png refused: address 10\.0\.0\.1 is not public$/);
      expect(connect).toHaveBeenCalledTimes(1); // the fixture only
    });

    it('refuses a redirect to a name that resolves to a private address', async () => {
      const result = await loopbackFetcher().fetch(fixture.url('/to-internal.png'), 'image', join(dir, 'a.png'));
      await expectFailure(result, /internal\.example resolves to 10\.0\.0\.1, which is not public$/);
    });
  });

  describe('refuses what D5 forbids, before any connection (production configuration)', () => {
    const refusing = tableLookup({
      localhost: ['127.0.0.1', '::1'],
      'public.example': ['10.1.2.3'],
      'mixed.example': ['93.184.216.34', '10.0.0.1'],
    });
    const production = () => createMediaFetcher({ lookup: refusing.lookup });

    it('WHATWG parsing turns decimal, octal and hex IPv4 into dotted form first', () => {
      for (const host of ['2130706433', '0177.0.0.1', '0x7f.1', '127.1']) expect(new URL(`https://${host}/`).hostname).toBe('127.0.0.1');
    });

    it.each([
      ['https://127.0.0.1/a.png', '127.0.0.1'],
      ['https://10.0.0.1/a.png', '10.0.0.1'],
      ['https://192.168.1.1/a.png', '192.168.1.1'],
      ['https://169.254.169.254/latest/meta-data', '169.254.169.254'],
      ['https://[::1]/a.png', '::1'],
      ['https://[::ffff:127.0.0.1]/a.png', '::ffff:7f00:1'],
      ['https://[fe80::1]/a.png', 'fe80::1'],
      ['https://2130706433/a.png', '127.0.0.1'],
      ['https://0177.0.0.1/a.png', '127.0.0.1'],
      ['https://0x7f.1/a.png', '127.0.0.1'],
      ['https://0.0.0.0/a.png', '0.0.0.0'],
    ])('literal %s', async (url, address) => {
      const connect = vi.spyOn(net.Socket.prototype, 'connect');
      refusing.asked.length = 0;
      const result = await production().fetch(url, 'image', join(dir, 'a.png'));
      await expectFailure(result, new RegExp(`^${url.replace(/[.[\]/]/g, '\\$&')}: address ${address.replace(/\./g, '\\.')} is not public$`));
      expect(connect).not.toHaveBeenCalled(); // no socket at all
      expect(refusing.asked).toEqual([]);
    });

    it.each([
      ['https://localhost/a.png', 'localhost resolves to 127.0.0.1'],
      ['https://public.example/a.png', 'public.example resolves to 10.1.2.3'],
      ['https://mixed.example/a.png', 'mixed.example resolves to 10.0.0.1'], // one bad address refuses the name
    ])('name %s, refused in the lookup', async (url, reason) => {
      refusing.asked.length = 0;
      const result = await production().fetch(url, 'image', join(dir, 'a.png'));
      await expectFailure(result, new RegExp(`${reason.replace(/\./g, '\\.')}, which is not public$`));
      expect(refusing.asked).toEqual([new URL(url).hostname]);
    });

    it('never opens a TCP connection to a refused address', async () => {
      // The one refused address a test can watch: the fixture's, without the test-only switch.
      const before = fixture.connections;
      const result = await createMediaFetcher({ ca: fixture.ca, lookup: dns.lookup }).fetch(fixture.url('/a.png'), 'image', join(dir, 'a.png'));
      await expectFailure(result, /localhost resolves to 127\.0\.0\.1, which is not public$/);
      expect(fixture.connections).toBe(before);
    });

    it.each([
      ['http://cdn.example.com/a.png', /must be an https:\/\/ URL$/],
      ['https://user:secret@cdn.example.com/a.png', /must not contain a user name or password$/],
      [`https://cdn.example.com/${'a'.repeat(2048)}.png`, /is longer than 2048 characters$/],
      ['not a url', /is not a valid URL$/],
    ])('a URL breaking the rules: %s', async (url, reason) => {
      refusing.asked.length = 0;
      await expectFailure(await production().fetch(url, 'image', join(dir, 'a.png')), reason);
      expect(refusing.asked).toEqual([]);
    });
  });

  it('throws, rather than blaming the media, when the destination cannot be written', async () => {
    await expect(loopbackFetcher().fetch(fixture.url('/a.png'), 'image', join(dir, 'missing', 'a.png'))).rejects.toThrow(/ENOENT/);
  });
});
