/**
 * Content sniffing: does a file's first bytes fit the kind its extension promises (D5)?
 * Pure. A server's Content-Type is not trusted for this — it is often generic or wrong.
 */
import type { MediaKind } from '../domain/catalog.js';

/** How many leading bytes `hasMagicOf` needs to decide (RIFF's form type ends at byte 12). */
export const SNIFF_BYTES = 12;

const ascii = (head: Buffer, offset: number, text: string) =>
  head.length >= offset + text.length && head.toString('latin1', offset, offset + text.length) === text;
const riff = (head: Buffer, form: string) => ascii(head, 0, 'RIFF') && ascii(head, 8, form);

const MATCHERS: Record<MediaKind, (head: Buffer) => boolean> = {
  image: (head) =>
    ascii(head, 0, '\x89PNG\r\n\x1a\n') ||
    ascii(head, 0, '\xff\xd8\xff') || // JPEG
    ascii(head, 0, 'GIF8') ||
    riff(head, 'WEBP') ||
    ascii(head, 0, 'BM'),
  // ISO base media (MP4, M4V, modern MOV) starts with an `ftyp` box; older QuickTime files
  // start straight with a movie, media-data or padding atom.
  video: (head) => ['ftyp', 'moov', 'mdat', 'wide', 'free'].some((atom) => ascii(head, 4, atom)),
  audio: (head) =>
    ascii(head, 0, 'ID3') ||
    (head.length >= 2 && head[0] === 0xff && (head[1]! & 0xe0) === 0xe0) || // MPEG frame sync
    riff(head, 'WAVE'),
};

export function hasMagicOf(kind: MediaKind, head: Buffer): boolean {
  return MATCHERS[kind](head);
}
