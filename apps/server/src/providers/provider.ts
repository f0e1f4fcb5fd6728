/**
 * The provider port: something that turns a task into an MP4. Routed by model
 * in configuration. A provider returns a result union; it throws only on bugs.
 *
 * - `local` renders offline with ffmpeg from the reference files the service
 *   fetched (`needsLocalMedia`).
 * - `byteplus` hands the reference URLs to BytePlus ModelArk (Seedance) and
 *   downloads the finished video.
 */
import type { AspectRatio, GenerationMode, MediaKind, ModelId, Resolution } from '../domain/catalog.js';
import type { components } from '@vidgen/types';

export type TaskErrorCode = components['schemas']['TaskErrorCode'];

export interface ReferenceMedia {
  /** The URL as the caller submitted it. */
  url: string;
  kind: MediaKind;
  /** The fetched file on local disk; present when the provider `needsLocalMedia`. */
  path?: string;
}

export interface GenerationRequest {
  taskId: string;
  model: ModelId;
  prompt: string;
  /** Seconds. */
  duration: number;
  aspectRatio: AspectRatio;
  resolution: Resolution;
  mode: GenerationMode;
  /** In submission order. */
  references: ReferenceMedia[];
  /** Where the provider must leave the finished MP4. */
  outputPath: string;
  /** Aborted when the task is cancelled or its deadline passes: stop work, kill children. */
  signal: AbortSignal;
}

export type GenerationResult =
  | { ok: true }
  | { ok: false; error: { code: TaskErrorCode; message: string } };

export interface Provider {
  readonly name: string;
  /** Whether the service must fetch the references to local files first. */
  readonly needsLocalMedia: boolean;
  generate(request: GenerationRequest): Promise<GenerationResult>;
}
