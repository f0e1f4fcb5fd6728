/**
 * What the local provider renders, decided without running anything: the frame
 * size, which references feed ffmpeg and in which role, the caption, the filter
 * graph and the ffmpeg arguments. Pure, so every rule here is unit-tested
 * without ffmpeg.
 *
 * The graph targets the ffmpeg 4.1 build of `@ffmpeg-installer/ffmpeg`, which has
 * no `xfade` and no `gradients`: transitions are an alpha `fade` under `overlay`,
 * and the generated scene is the `life` source.
 *
 * File names in the graph (`caption.txt`, `font.ttf`, `ref-0.png`, …) are
 * relative: ffmpeg runs inside a work directory where the provider links them,
 * so no machine path ever needs filtergraph escaping.
 */
import { createHash } from 'node:crypto';
import type { AspectRatio, GenerationMode, MediaKind, Resolution } from '../../domain/catalog.js';

export const FPS = 24;
/** The caption, written by the provider into the work directory (drawtext `textfile=`). */
export const CAPTION_FILE = 'caption.txt';
/** A link to the DejaVu font in the work directory. */
export const FONT_FILE = 'font.ttf';

export type X264Preset = 'ultrafast' | 'superfast' | 'veryfast' | 'faster' | 'fast' | 'medium';

export interface FrameSize {
  width: number;
  height: number;
}

const SHORT_SIDE: Readonly<Record<Resolution, number>> = { '480p': 480, '720p': 720, '1080p': 1080 };

/** x264 with yuv420p needs even dimensions; 16:9 at 480p is 853.3 wide, so 854. */
const nearestEven = (value: number) => 2 * Math.round(value / 2);

/** The resolution names the short side: 9:16 at 720p is 720×1280. */
export function frameSize(aspectRatio: AspectRatio, resolution: Resolution): FrameSize {
  const short = SHORT_SIDE[resolution];
  const long = aspectRatio === '1:1' ? short : nearestEven((short * 16) / 9);
  return aspectRatio === '9:16' ? { width: short, height: long } : { width: long, height: short };
}

// ---------------------------------------------------------------------------
// Which references play which part

export type InputRole = 'background' | 'first_frame' | 'last_frame' | 'thumbnail' | 'soundtrack';

export interface PlanInput {
  /** Index into the request's references. */
  reference: number;
  kind: MediaKind;
  role: InputRole;
}

/** Images beside a background video or image, shown as small pictures so that every visual reference is seen. */
const MAX_THUMBNAILS = 3;

const indexesOf = (kinds: readonly MediaKind[], kind: MediaKind) =>
  kinds.flatMap((k, index) => (k === kind ? [index] : []));

/**
 * The inputs each mode uses. The first audio reference is the soundtrack in any
 * mode, so the output has an audio stream exactly when audio was referenced.
 */
export function chooseInputs(mode: GenerationMode, kinds: readonly MediaKind[]): { ok: true; inputs: PlanInput[] } | { ok: false; message: string } {
  const images = indexesOf(kinds, 'image');
  const videos = indexesOf(kinds, 'video');
  const audio = indexesOf(kinds, 'audio');
  const visual: PlanInput[] = [];

  switch (mode) {
    case 'text_to_video':
      break;
    case 'first_frame': {
      const [first] = images;
      if (first === undefined) return { ok: false, message: 'first_frame needs an image reference' };
      visual.push({ reference: first, kind: 'image', role: 'first_frame' });
      break;
    }
    case 'first_last_frame': {
      const [first, last] = images;
      if (first === undefined || last === undefined) return { ok: false, message: 'first_last_frame needs two image references' };
      visual.push({ reference: first, kind: 'image', role: 'first_frame' }, { reference: last, kind: 'image', role: 'last_frame' });
      break;
    }
    case 'multimodal_reference': {
      // A video drives the motion when there is one; only the first is used,
      // because each more video costs a full decode per frame.
      const [video] = videos;
      const [firstImage, ...otherImages] = images;
      if (video !== undefined) {
        visual.push({ reference: video, kind: 'video', role: 'background' });
        for (const image of images.slice(0, MAX_THUMBNAILS)) visual.push({ reference: image, kind: 'image', role: 'thumbnail' });
      } else if (firstImage !== undefined) {
        visual.push({ reference: firstImage, kind: 'image', role: 'background' });
        for (const image of otherImages.slice(0, MAX_THUMBNAILS)) visual.push({ reference: image, kind: 'image', role: 'thumbnail' });
      } else {
        return { ok: false, message: 'multimodal_reference needs an image or video reference' };
      }
      break;
    }
    default:
      return assertNever(mode);
  }

  const [soundtrack] = audio;
  const inputs = soundtrack === undefined ? visual : [...visual, { reference: soundtrack, kind: 'audio' as const, role: 'soundtrack' as const }];
  return { ok: true, inputs };
}

function assertNever(value: never): never {
  throw new Error(`unexpected value ${String(value)}`);
}

// ---------------------------------------------------------------------------
// The generated scene: the same prompt always gives the same picture

export interface Scene {
  /** Seed of the `life` source's random first generation. */
  seed: number;
  /** Game-of-life rule: Conway's or HighLife, both stay busy for seconds. */
  rule: 'B3/S23' | 'B36/S23';
  /** Share of cells alive at the start, 0.2–0.44. */
  fillRatio: number;
  /** Degrees; the whole scene's hue turns from here so it keeps moving after the cells settle. */
  hue: number;
  colours: { alive: string; dying: string; dead: string };
}

export function sceneFromPrompt(prompt: string): Scene {
  const digest = createHash('sha256').update(prompt, 'utf8').digest();
  const hue = digest.readUInt16BE(4) % 360;
  return {
    seed: digest.readUInt32BE(0),
    rule: digest[6]! % 2 === 0 ? 'B3/S23' : 'B36/S23',
    fillRatio: 0.2 + (digest[7]! % 25) / 100,
    hue,
    colours: {
      alive: hslToHex(hue, 0.85, 0.6),
      dying: hslToHex(hue + 40, 0.6, 0.32),
      dead: hslToHex(hue + 180, 0.5, 0.12),
    },
  };
}

/** `0xRRGGBB`: ffmpeg's colour syntax without `#`, which needs no escaping anywhere. */
export function hslToHex(hueDegrees: number, saturation: number, lightness: number): string {
  const h = (((hueDegrees % 360) + 360) % 360) / 60;
  const chroma = (1 - Math.abs(2 * lightness - 1)) * saturation;
  const x = chroma * (1 - Math.abs((h % 2) - 1));
  const [r, g, b] = h < 1 ? [chroma, x, 0] : h < 2 ? [x, chroma, 0] : h < 3 ? [0, chroma, x] : h < 4 ? [0, x, chroma] : h < 5 ? [x, 0, chroma] : [chroma, 0, x];
  const m = lightness - chroma / 2;
  const byte = (v: number) => Math.round((v + m) * 255).toString(16).padStart(2, '0');
  return `0x${byte(r)}${byte(g)}${byte(b)}`;
}

// ---------------------------------------------------------------------------
// The caption: the prompt, wrapped and cut to fit the frame

export interface CaptionLayout {
  fontSize: number;
  /** Distance of the caption box from the bottom edge and of thumbnails from the corner. */
  margin: number;
  boxBorder: number;
  lineSpacing: number;
  charactersPerLine: number;
  maxLines: number;
}

/**
 * DejaVu Sans Bold averages about 0.62 em per character in mixed text; wider
 * runs (capitals, glyphs the font lacks) may reach the edge, where drawtext
 * clips instead of failing.
 */
const AVERAGE_CHARACTER_WIDTH_EM = 0.62;

export function captionLayout({ width, height }: FrameSize): CaptionLayout {
  const short = Math.min(width, height);
  const fontSize = Math.round(short * 0.05);
  const margin = Math.round(short * 0.05);
  const boxBorder = Math.round(fontSize / 3);
  const usableWidth = width - 2 * margin - 2 * boxBorder;
  return {
    fontSize,
    margin,
    boxBorder,
    lineSpacing: Math.round(fontSize / 4),
    charactersPerLine: Math.max(8, Math.floor(usableWidth / (fontSize * AVERAGE_CHARACTER_WIDTH_EM))),
    maxLines: height > width ? 5 : 3,
  };
}

const graphemeSegmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });
/** User-perceived characters, so an emoji or an accented letter is never split across lines. */
const graphemes = (text: string) => Array.from(graphemeSegmenter.segment(text), (s) => s.segment);

/**
 * The prompt as lines of at most `charactersPerLine` characters: whitespace and
 * control characters (newlines included) fold into single spaces, words wrap,
 * a word longer than a line is cut, and text beyond `maxLines` ends in "…".
 */
export function wrapCaption(prompt: string, charactersPerLine: number, maxLines: number): string[] {
  const words = prompt.replace(/[\s\p{Cc}\p{Zl}\p{Zp}]+/gu, ' ').trim().split(' ').filter(Boolean);
  const lines: string[][] = [];
  let current: string[] = [];
  const breakLine = () => {
    if (current.length > 0) lines.push(current);
    current = [];
  };
  for (const word of words) {
    let characters = graphemes(word);
    const needed = current.length === 0 ? characters.length : characters.length + 1;
    if (current.length + needed > charactersPerLine) breakLine();
    while (characters.length > charactersPerLine) {
      lines.push(characters.slice(0, charactersPerLine));
      characters = characters.slice(charactersPerLine);
    }
    if (current.length > 0) current.push(' ');
    current.push(...characters);
  }
  breakLine();

  if (lines.length <= maxLines) return lines.map((line) => line.join(''));
  const kept = lines.slice(0, maxLines).map((line) => line.join(''));
  const last = graphemes(kept[maxLines - 1]!).slice(0, charactersPerLine - 1);
  kept[maxLines - 1] = `${last.join('').trimEnd()}…`;
  return kept;
}

// ---------------------------------------------------------------------------
// The plan

export interface RenderSpec {
  prompt: string;
  /** Seconds. */
  duration: number;
  aspectRatio: AspectRatio;
  resolution: Resolution;
  mode: GenerationMode;
  /** Kinds of the request's references, in submission order. */
  referenceKinds: readonly MediaKind[];
}

export interface RenderPlan extends FrameSize {
  fps: number;
  duration: number;
  /** Frames in the output: duration × fps, rounded up. */
  frames: number;
  /** In ffmpeg input order: `inputs[i]` is ffmpeg's input `i`. */
  inputs: PlanInput[];
  /** The prompt as shown, one entry per line; empty when nothing printable is left. */
  caption: string[];
  /** `-filter_complex`: produces `[v]`, and `[a]` when there is a soundtrack. */
  filterGraph: string;
  hasAudio: boolean;
}

export type RenderPlanResult = { ok: true; plan: RenderPlan } | { ok: false; message: string };

/** First frame to last frame, the picture zooms in this much: visible motion, cheap. */
const ZOOM_GROWTH = 0.12;

export function buildRenderPlan(spec: RenderSpec): RenderPlanResult {
  if (!Number.isFinite(spec.duration) || spec.duration <= 0) return { ok: false, message: `duration must be a positive number of seconds, not ${spec.duration}` };
  const chosen = chooseInputs(spec.mode, spec.referenceKinds);
  if (!chosen.ok) return chosen;

  const size = frameSize(spec.aspectRatio, spec.resolution);
  const frames = Math.ceil(spec.duration * FPS);
  const layout = captionLayout(size);
  const caption = wrapCaption(spec.prompt, layout.charactersPerLine, layout.maxLines);
  const scene = sceneFromPrompt(spec.prompt);
  const context: GraphContext = { ...size, frames, duration: spec.duration, padColour: scene.colours.dead, layout };

  const chains = [...visualChains(chosen.inputs, scene, context)];
  const captioned = caption.length > 0 ? `${drawCaption(layout)},` : '';
  chains.push(`[base]${captioned}format=yuv420p[v]`);
  const soundtrack = chosen.inputs.findIndex((input) => input.role === 'soundtrack');
  if (soundtrack >= 0) {
    // apad makes a short soundtrack last to the end; `-t` cuts a long one.
    chains.push(`[${soundtrack}:a:0]aresample=48000,apad[a]`);
  }

  return {
    ok: true,
    plan: { ...size, fps: FPS, duration: spec.duration, frames, inputs: chosen.inputs, caption, filterGraph: chains.join(';'), hasAudio: soundtrack >= 0 },
  };
}

interface GraphContext extends FrameSize {
  frames: number;
  duration: number;
  padColour: string;
  layout: CaptionLayout;
}

/** The chains that end in `[base]`: the moving picture before the caption. */
function visualChains(inputs: readonly PlanInput[], scene: Scene, context: GraphContext): string[] {
  const at = (role: InputRole) => inputs.findIndex((input) => input.role === role);
  const first = at('first_frame');
  const last = at('last_frame');
  const background = at('background');

  if (first >= 0 && last >= 0) return crossfade(first, last, context);
  if (first >= 0) return [`[${first}:v]${zoomingStill(context)}[base]`];
  if (background < 0) return [`${generatedScene(scene, context)}[base]`];

  const backgroundChain = inputs[background]!.kind === 'video' ? movingVideo(context) : zoomingStill(context);
  const thumbnails = inputs.flatMap((input, index) => (input.role === 'thumbnail' ? [index] : []));
  if (thumbnails.length === 0) return [`[${background}:v]${backgroundChain}[base]`];
  return [`[${background}:v]${backgroundChain}[layer0]`, ...thumbnailChains(thumbnails, context)];
}

/** Decoded once, scaled once, then repeated: a looping demuxer would decode the file for every frame. */
const firstFrameOnly = 'trim=end_frame=1';
const repeatForever = (fps: number) => `loop=loop=-1:size=1:start=0,setpts=N/${fps}/TB`;

/** The whole picture inside the frame, the rest filled with the scene's dark colour. */
const fitInside = ({ width, height, padColour }: GraphContext) =>
  `scale=${width}:${height}:force_original_aspect_ratio=decrease,pad=${width}:${height}:(ow-iw)/2:(oh-ih)/2:color=${padColour},setsar=1`;

/** Frame 0 is exactly the fitted image; then a slow zoom towards its centre. */
function zoomingStill(context: GraphContext): string {
  const { width, height, frames } = context;
  const zoom = `1+${ZOOM_GROWTH}*on/${Math.max(1, frames - 1)}`;
  return `${firstFrameOnly},${fitInside(context)},zoompan=z='${zoom}':x='iw/2-iw/zoom/2':y='ih/2-ih/zoom/2':d=${frames}:s=${width}x${height}:fps=${FPS}`;
}

/**
 * The first image holds for the first quarter, dissolves into the second over the
 * middle half, and the second holds to the end, so the last frame is exactly it.
 */
function crossfade(first: number, last: number, context: GraphContext): string[] {
  const start = round3(context.duration / 4);
  const length = round3(context.duration / 2);
  return [
    `[${first}:v]${firstFrameOnly},${fitInside(context)},format=yuv420p,${repeatForever(FPS)}[from]`,
    `[${last}:v]${firstFrameOnly},${fitInside(context)},format=yuva420p,${repeatForever(FPS)},fade=t=in:st=${start}:d=${length}:alpha=1[to]`,
    `[from][to]overlay=format=yuv420[base]`,
  ];
}

/** Fills the frame (cropping the overflow); the provider loops the file when it is shorter than the render. */
function movingVideo({ width, height }: GraphContext): string {
  return `setpts=PTS-STARTPTS,fps=${FPS},scale=${width}:${height}:force_original_aspect_ratio=increase,crop=${width}:${height},setsar=1`;
}

/** Up to three pictures in a row along the top edge. */
function thumbnailChains(thumbnails: readonly number[], context: GraphContext): string[] {
  const short = Math.min(context.width, context.height);
  const box = nearestEven(short * 0.22);
  const { margin } = context.layout;
  const chains: string[] = [];
  thumbnails.forEach((input, position) => {
    chains.push(`[${input}:v]${firstFrameOnly},scale=${box}:${box}:force_original_aspect_ratio=decrease,setsar=1,format=yuv420p,${repeatForever(FPS)}[thumb${position}]`);
    const output = position === thumbnails.length - 1 ? 'base' : `layer${position + 1}`;
    chains.push(`[layer${position}][thumb${position}]overlay=x=${margin + position * (box + margin)}:y=${margin}:format=yuv420[${output}]`);
  });
  return chains;
}

/**
 * A game of life on a coarse grid (about 36 cells across the short side) with
 * fading "mould", scaled up with hard edges and slowly turning hue. Everything
 * costly happens on the tiny grid, and big flat cells encode cheaply.
 */
function generatedScene(scene: Scene, { width, height }: GraphContext): string {
  const short = Math.min(width, height);
  const columns = Math.round((width * 36) / short);
  const rows = Math.round((height * 36) / short);
  const { alive, dying, dead } = scene.colours;
  return [
    `life=s=${columns}x${rows}:r=8:rule=${scene.rule}:ratio=${scene.fillRatio.toFixed(2)}:seed=${scene.seed}:mold=20:life_color=${alive}:death_color=${dead}:mold_color=${dying}`,
    // yuv444p on the grid keeps each cell's colour its own after chroma subsampling.
    `format=yuv444p,hue=h=${scene.hue}+t*20`,
    `scale=${width}:${height}:flags=neighbor,fps=${FPS},setsar=1`,
  ].join(',');
}

function drawCaption(layout: CaptionLayout): string {
  // expansion=none: `%{…}` and backslashes in the prompt are text, not drawtext syntax.
  return [
    `drawtext=fontfile=${FONT_FILE}:textfile=${CAPTION_FILE}:expansion=none`,
    `fontsize=${layout.fontSize}:fontcolor=white:line_spacing=${layout.lineSpacing}`,
    `box=1:boxcolor=black@0.55:boxborderw=${layout.boxBorder}`,
    `x=(w-text_w)/2:y=h-text_h-${layout.margin}`,
  ].join(':');
}

const round3 = (value: number) => Math.round(value * 1000) / 1000;

// ---------------------------------------------------------------------------
// The command line

export interface EncodingOptions {
  /** Names of the input files, parallel to `plan.inputs` (relative to ffmpeg's working directory). */
  inputFiles: readonly string[];
  output: string;
  /** Encoder and filter-graph threads. */
  threads: number;
  preset: X264Preset;
}

export function ffmpegArguments(plan: RenderPlan, options: EncodingOptions): string[] {
  if (options.inputFiles.length !== plan.inputs.length) throw new Error(`${plan.inputs.length} inputs planned, ${options.inputFiles.length} files given`);
  const inputs = plan.inputs.flatMap((input, index) => {
    // A background video shorter than the render starts over; `-t` ends the loop.
    const loop = input.role === 'background' && input.kind === 'video' ? ['-stream_loop', '-1'] : [];
    return [...loop, '-i', options.inputFiles[index]!];
  });
  const audio = plan.hasAudio ? ['-map', '[a]', '-c:a', 'aac', '-b:a', '128k'] : [];
  return [
    '-hide_banner', '-nostdin', '-nostats', '-loglevel', 'error', '-y',
    ...inputs,
    '-filter_complex', plan.filterGraph,
    '-filter_complex_threads', String(options.threads),
    '-map', '[v]',
    ...audio,
    '-t', String(plan.duration),
    '-r', String(plan.fps),
    '-c:v', 'libx264', '-preset', options.preset, '-crf', '23', '-pix_fmt', 'yuv420p',
    '-threads', String(options.threads),
    '-movflags', '+faststart',
    '-f', 'mp4', options.output,
  ];
}
