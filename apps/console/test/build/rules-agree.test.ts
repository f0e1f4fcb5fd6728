/**
 * The Generate form previews how the service will read its references (the kind of each URL,
 * the mode of the set) with its own copy of those rules: the console cannot import the server.
 * This keeps the copy equal to the service's rules, so the preview never says what the service
 * will not do.
 */
import { describe, expect, it } from 'vitest';
import * as server from '../../../server/src/domain/rules';
import * as preview from '../../src/features/generate/references';

const URLS = [
  ...['jpg', 'jpeg', 'png', 'webp', 'gif', 'bmp', 'mp4', 'mov', 'm4v', 'mp3', 'wav', 'JPG', 'Mp4', 'txt', 'tiff', 'avi', 'webm', 'flac', ''].map(
    (ext) => `https://cdn.example.com/refs/a.${ext}`,
  ),
  'https://cdn.example.com/a.png?size=large#top',
  'https://cdn.example.com/a.png/b',
  'https://cdn.example.com/dir.mp4/',
  'https://cdn.example.com',
  'https://08/a.png',
  'HTTPS://CDN.EXAMPLE.COM/A.MOV',
  'https://cdn.example.com/a.mp3?x=.png',
];

describe("the Generate form's preview of the service's rules", () => {
  it.each(URLS)('reads the kind of %s as the service does', (url) => {
    expect(preview.mediaKindOf(url)).toBe(server.mediaKindOf(url));
  });

  it('reads the mode of every set of up to 3 references as the service does', () => {
    const kinds = ['image', 'video', 'audio'] as const;
    const sets: (typeof kinds)[number][][] = [[]];
    for (let size = 1; size <= 3; size++) for (const set of sets.filter((s) => s.length === size - 1)) for (const kind of kinds) sets.push([...set, kind]);
    for (const set of sets) expect(preview.inferMode(set), set.join(',')).toBe(server.inferMode(set));
  });
});
