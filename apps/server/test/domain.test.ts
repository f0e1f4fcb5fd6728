import { describe, expect, it } from 'vitest';
import { DEFAULT_PRICES, describeModels, parsePriceTable, priceOf } from '../src/domain/catalog.js';
import { decodeCursor, encodeCursor } from '../src/domain/cursor.js';
import { apiKeyHint, generateApiKey, hashApiKey, isWellFormedApiKey } from '../src/domain/keys.js';
import { checkSubmissionRules, explainUrl, inferMode, mediaKindOf } from '../src/domain/rules.js';
import { CANCELLABLE_STATES, TASK_STATES, canTransition, isTerminal, pollHintSeconds } from '../src/domain/states.js';

describe('API keys', () => {
  it('have the prefix, 38 base62 characters and a valid checksum', () => {
    const key = generateApiKey('live');
    expect(key).toMatch(/^vg_live_[0-9A-Za-z]{38}$/);
    expect(isWellFormedApiKey(key)).toBe(true);
    expect(isWellFormedApiKey(generateApiKey('test'))).toBe(true);
  });

  it('refuse a typo by checksum, before any lookup', () => {
    const key = generateApiKey('live');
    const typo = key.slice(0, 12) + (key[12] === 'a' ? 'b' : 'a') + key.slice(13);
    expect(isWellFormedApiKey(typo)).toBe(false);
    expect(isWellFormedApiKey(key.slice(0, -1))).toBe(false);
    expect(isWellFormedApiKey(key.replace('vg_live_', 'vg_prod_'))).toBe(false);
  });

  it('are stored as a SHA-256 and shown as a hint without the secret part', () => {
    const key = generateApiKey('live');
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashApiKey(key)).not.toContain(key.slice(8));
    expect(apiKeyHint(key)).toBe(`vg_live_…${key.slice(-4)}`);
  });
});

describe('media rules', () => {
  it('tells the kind by the path extension, case-insensitively, ignoring the query', () => {
    expect(mediaKindOf('https://x.com/a/b.JPG?size=2')).toBe('image');
    expect(mediaKindOf('https://x.com/clip.m4v#t=3')).toBe('video');
    expect(mediaKindOf('https://x.com/beat.Wav')).toBe('audio');
    expect(mediaKindOf('https://x.com/notes.txt')).toBeUndefined();
    expect(mediaKindOf('https://x.com/a.png.exe')).toBeUndefined();
    expect(mediaKindOf('https://x.com/file?name=a.png')).toBeUndefined();
  });

  it('infers the mode from the kinds', () => {
    expect(inferMode([])).toBe('text_to_video');
    expect(inferMode(['image'])).toBe('first_frame');
    expect(inferMode(['image', 'image'])).toBe('first_last_frame');
    expect(inferMode(['image', 'image', 'image'])).toBe('multimodal_reference');
    expect(inferMode(['video'])).toBe('multimodal_reference');
    expect(inferMode(['image', 'audio'])).toBe('multimodal_reference');
  });

  it('refuses audio without an image or a video', () => {
    expect(checkSubmissionRules({ model: 'vidgen-2.0', mediaUrls: ['https://x.com/a.mp3'] })).toEqual([
      { field: '/mediaUrls', message: 'audio needs at least one image or video beside it' },
    ]);
    expect(checkSubmissionRules({ model: 'vidgen-2.0', mediaUrls: ['https://x.com/a.mp3', 'https://x.com/v.mp4'] })).toEqual([]);
  });

  it('refuses video and audio for vidgen-1.5-pro, naming each', () => {
    const violations = checkSubmissionRules({ model: 'vidgen-1.5-pro', mediaUrls: ['https://x.com/a.png', 'https://x.com/v.mov'] });
    expect(violations).toEqual([{ field: '/mediaUrls/1', message: 'is a video; vidgen-1.5-pro accepts image only' }]);
  });

  it('refuses metadata over 4 KiB serialized', () => {
    expect(checkSubmissionRules({ model: 'vidgen-2.0', metadata: { a: 'x'.repeat(4088) } })).toEqual([]);
    expect(checkSubmissionRules({ model: 'vidgen-2.0', metadata: { a: 'x'.repeat(4089) } })).toEqual([
      { field: '/metadata', message: 'must be at most 4096 bytes serialized' },
    ]);
  });

  it('refuses a prompt or metadata that is not text (NUL, unpaired surrogates), naming where', () => {
    const notText = 'must be text: no NUL character (U+0000) and no unpaired surrogate';
    expect(checkSubmissionRules({ model: 'vidgen-2.0', prompt: 'a\u0000b' })).toEqual([{ field: '/prompt', message: notText }]);
    expect(checkSubmissionRules({ model: 'vidgen-2.0', prompt: 'lone \ud800 high' })).toEqual([{ field: '/prompt', message: notText }]);
    expect(checkSubmissionRules({ model: 'vidgen-2.0', prompt: 'lone \udc00 low' })).toEqual([{ field: '/prompt', message: notText }]);
    expect(checkSubmissionRules({ model: 'vidgen-2.0', metadata: { order: { 'a/b': ['ok', 'x\u0000'] } } })).toEqual([{ field: '/metadata/order/a~1b/1', message: notText }]);
    expect(checkSubmissionRules({ model: 'vidgen-2.0', metadata: { ['k\ud83d']: 1 } })).toEqual([{ field: '/metadata/k\ud83d', message: notText }]);
    // Paired surrogates (emoji), control characters other than NUL, RTL marks: text.
    expect(checkSubmissionRules({ model: 'vidgen-2.0', prompt: 'a 😀 boat\t\u202e\ufeff', metadata: { '😀': '\u0001' } })).toEqual([]);
  });

  it('explains why a URL is refused', () => {
    expect(explainUrl('http://x.com/a.png', { needsMediaKind: true })).toBe('must be an https:// URL');
    expect(explainUrl('https://u:p@x.com/a.png', { needsMediaKind: true })).toBe('must not contain a user name or password');
    expect(explainUrl('https://x.com/a.txt', { needsMediaKind: true })).toMatch(/known extension/);
    expect(explainUrl('https://x.com/hook', { needsMediaKind: false })).toBeUndefined();
    expect(explainUrl(`https://x.com/${'a'.repeat(2050)}.png`, { needsMediaKind: true })).toMatch(/2048/);
  });
});

describe('prices', () => {
  it('are rate(model, resolution) × duration with the D4 defaults', () => {
    expect(priceOf(DEFAULT_PRICES, 'vidgen-2.0', '720p', 5)).toBe(40);
    expect(priceOf(DEFAULT_PRICES, 'vidgen-2.0-fast', '1080p', 15)).toBe(150);
    expect(priceOf(DEFAULT_PRICES, 'vidgen-1.5-pro', '480p', 10)).toBe(20);
  });

  it('can be overridden in part by configuration, and refuse nonsense', () => {
    const table = parsePriceTable('{"vidgen-2.0":{"1080p":20}}');
    expect(table['vidgen-2.0']).toEqual({ '480p': 5, '720p': 8, '1080p': 20 });
    expect(() => parsePriceTable('{"vidgen-3":{}}')).toThrow(/unknown model/);
    expect(() => parsePriceTable('{"vidgen-2.0":{"4k":1}}')).toThrow(/unknown resolution/);
    expect(() => parsePriceTable('{"vidgen-2.0":{"480p":-1}}')).toThrow(/whole number/);
    expect(() => parsePriceTable('[')).toThrow();
  });

  it('are published per model with the model rules', () => {
    const pro = describeModels(DEFAULT_PRICES).find((m) => m.id === 'vidgen-1.5-pro')!;
    expect(pro.durations).toEqual([5, 10]);
    expect(pro.media).toEqual({ kinds: ['image'], maxItems: 2 });
    expect(pro.prices).toEqual([
      { resolution: '480p', creditsPerSecond: 2 },
      { resolution: '720p', creditsPerSecond: 4 },
      { resolution: '1080p', creditsPerSecond: 8 },
    ]);
  });
});

describe('task states', () => {
  it('never leave a terminal state', () => {
    for (const from of ['succeeded', 'failed', 'cancelled'] as const) {
      expect(isTerminal(from)).toBe(true);
      for (const to of Object.values(TASK_STATES)) expect(canTransition(from, to)).toBe(false);
    }
  });

  it('cancel only queued or processing tasks, and hint polls only for those', () => {
    expect([...CANCELLABLE_STATES].sort()).toEqual(['processing', 'queued']);
    expect(pollHintSeconds('queued')).toBeGreaterThan(0);
    expect(pollHintSeconds('succeeded')).toBeUndefined();
  });
});

describe('cursors', () => {
  it('round-trip a position and refuse anything else', () => {
    const position = { createdAt: new Date('2026-11-22T10:00:00.000Z'), id: 'gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', filter: 'queued' };
    expect(decodeCursor(encodeCursor(position))).toEqual(position);
    expect(decodeCursor('bm90LWEtY3Vyc29y')).toBeUndefined();
    expect(decodeCursor('%%%')).toBeUndefined();
    expect(decodeCursor(Buffer.from('{"t":"x","i":"a","s":null}').toString('base64url'))).toBeUndefined();
  });
});
