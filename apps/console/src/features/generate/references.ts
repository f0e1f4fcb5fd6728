/**
 * How the service reads a set of references, so the form can say it before submitting. The
 * service decides (apps/server/src/domain/rules.ts); this follows the spec's MediaKind,
 * MediaUrl and GenerationMode descriptions, which are the contract it keeps.
 */
import type { components } from '@vidgen/client';

export type MediaKind = components['schemas']['MediaKind'];
export type GenerationMode = components['schemas']['GenerationMode'];

// The API publishes the kinds (MediaKind) but not the extensions behind them: these are the
// ones MediaKind's description lists.
const KIND_BY_EXTENSION: Readonly<Record<string, MediaKind>> = {
  jpg: 'image',
  jpeg: 'image',
  png: 'image',
  webp: 'image',
  gif: 'image',
  bmp: 'image',
  mp4: 'video',
  mov: 'video',
  m4v: 'video',
  mp3: 'audio',
  wav: 'audio',
};

/**
 * The kind of a reference by its path's extension (case-insensitive, query and fragment
 * ignored). Read from the text rather than with `new URL`, as the service does, so a half-typed
 * URL already shows its kind.
 */
export function mediaKindOf(url: string): MediaKind | undefined {
  const path = url
    .trim()
    .replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, '')
    .replace(/[?#][^]*$/, '');
  const extension = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return extension ? KIND_BY_EXTENSION[extension] : undefined;
}

/** none → text to video; 1 image → first frame; 2 images → first and last frame; else multimodal. */
export function inferMode(kinds: readonly MediaKind[]): GenerationMode {
  if (kinds.length === 0) return 'text_to_video';
  const images = kinds.filter((kind) => kind === 'image').length;
  if (images === kinds.length && images === 1) return 'first_frame';
  if (images === kinds.length && images === 2) return 'first_last_frame';
  return 'multimodal_reference';
}

/** Every mode, named for people; a mode added to the spec is a type error here until named. */
export const MODE_LABELS = {
  text_to_video: 'Text to video',
  first_frame: 'First frame',
  first_last_frame: 'First and last frame',
  multimodal_reference: 'Multimodal reference',
} as const satisfies Record<GenerationMode, string>;
