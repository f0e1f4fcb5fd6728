/**
 * The BytePlus ModelArk content-generation task protocol (Seedance video), as much of it as this
 * adapter speaks. Pure: builds request bodies and reads answers; no I/O.
 *
 * Sources, read 2026 (see each item for what is confirmed and what is assumed):
 * - Endpoints and base URL: "Video Generation API", https://docs.byteplus.com/docs/ModelArk/1520757 —
 *   `POST https://ark.ap-southeast.bytepluses.com/api/v3/contents/generations/tasks`, API-key auth
 *   (`Authorization: Bearer <key>`), `GET …/tasks/{id}`, `DELETE …/tasks/{id}`.
 * - Task statuses `queued | running | cancelled | succeeded | failed | expired`, `content.video_url`
 *   (an MP4, valid for 24 h), `error: {code, message}` or null: the query reference as mirrored by
 *   docs.powertokens.ai/en/zmodelVideo/byteplus/seedance/seedance-tasks-query (a reseller stating
 *   that its bodies are identical to the official API).
 * - DELETE cancels a `queued` task (it becomes `cancelled`), refuses a `running` one and deletes
 *   the record of a finished one: same mirror, …/seedance/cancel-delete-video-task.
 * - Error body `{ error: { code, message, param, type } }` on HTTP 4xx/5xx:
 *   https://docs.byteplus.com/en/docs/ModelArk/1298460 ("Return Structure").
 * - Moderation codes `SensitiveContentDetected[.*]`, `InputTextSensitiveContentDetected`,
 *   `InputImageSensitiveContentDetected`, …: https://docs.byteplus.com/en/docs/ModelArk/1299023
 *   ("Error codes"); Volcengine's edition of that table adds `Input…/Output…RiskDetection`.
 *   `OutputVideoSensitiveContentDetected` follows the same naming but is not on the pages we read;
 *   matching on the pattern covers it either way.
 */
import type { AspectRatio, GenerationMode, Resolution } from '../../domain/catalog.js';
import type { ReferenceMedia } from '../provider.js';

export const TASKS_PATH = '/contents/generations/tasks';

export type ImageRole = 'first_frame' | 'last_frame' | 'reference_image';

export type ContentItem =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string }; role: ImageRole }
  | { type: 'video_url'; video_url: { url: string }; role: 'reference_video' }
  | { type: 'audio_url'; audio_url: { url: string }; role: 'reference_audio' };

/**
 * The create body. `ratio`, `duration` and `resolution` go as body fields, not as the older
 * `--ratio 16:9 --dur 5 --rs 720p` commands appended to the prompt: the current reference (as
 * mirrored by docs.powertokens.ai …/seedance/seedance-video; the byteplus-py and Mesh API wrappers
 * send them the same way) lists them as body fields, while the text commands appear only in the
 * older Seedance 1.0 examples (docs.byteplus.com …/1520757, earlier edition). Assumed, not
 * confirmed: that the official page still accepts both for 1.x and only the fields for 2.0 (the
 * mirror's caution about the 2.0 series is cut off in the copy we read). Body fields work for both.
 * `watermark: false` because we re-host the file as our own output.
 */
export interface CreateTaskBody {
  model: string;
  content: ContentItem[];
  ratio: AspectRatio;
  duration: number;
  resolution: Resolution;
  watermark: boolean;
  /** Where the upstream POSTs on status changes: a hint to query the task, never trusted as its result. */
  callback_url?: string;
}

export const TASK_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'expired'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export interface UpstreamError {
  code: string;
  message: string;
}

export interface UpstreamTask {
  id: string;
  status: TaskStatus;
  /** Present when `succeeded`. */
  videoUrl?: string;
  /** Present when `failed` (and sometimes `expired`). */
  error?: UpstreamError;
  /** What the task cost upstream (`usage`), when the answer says. */
  usage?: { completionTokens: number | null; totalTokens: number | null };
}

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

/**
 * Maps our mode and references onto content items and roles. The service has already decided the
 * mode from the references (D5), so a mismatch here is our own inconsistency, reported as such.
 */
export function buildContent(mode: GenerationMode, prompt: string, references: ReferenceMedia[]): Parsed<ContentItem[]> {
  const text: ContentItem = { type: 'text', text: prompt };
  const images = references.filter((r) => r.kind === 'image');
  const onlyImages = images.length === references.length;
  const image = (url: string, role: ImageRole): ContentItem => ({ type: 'image_url', image_url: { url }, role });
  switch (mode) {
    case 'text_to_video':
      if (references.length > 0) return { ok: false, message: 'text_to_video takes no references' };
      return { ok: true, value: [text] };
    case 'first_frame':
      if (!onlyImages || images.length !== 1) return { ok: false, message: 'first_frame takes exactly one image' };
      return { ok: true, value: [text, image(images[0]!.url, 'first_frame')] };
    case 'first_last_frame':
      if (!onlyImages || images.length !== 2) return { ok: false, message: 'first_last_frame takes exactly two images' };
      return { ok: true, value: [text, image(images[0]!.url, 'first_frame'), image(images[1]!.url, 'last_frame')] };
    case 'multimodal_reference': {
      if (references.length === 0) return { ok: false, message: 'multimodal_reference takes at least one reference' };
      const items = references.map((r): ContentItem => {
        switch (r.kind) {
          case 'image':
            return image(r.url, 'reference_image');
          case 'video':
            return { type: 'video_url', video_url: { url: r.url }, role: 'reference_video' };
          case 'audio':
            return { type: 'audio_url', audio_url: { url: r.url }, role: 'reference_audio' };
          default:
            return assertNever(r.kind);
        }
      });
      return { ok: true, value: [text, ...items] };
    }
    default:
      return assertNever(mode);
  }
}

function assertNever(value: never): never {
  throw new Error(`unhandled value ${String(value)}`);
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export function parseJson(text: string): Parsed<unknown> {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, message: 'malformed JSON' };
  }
}

/** The create answer: `{ id }`. */
export function parseCreated(body: unknown): Parsed<string> {
  if (isRecord(body) && typeof body.id === 'string' && body.id.length > 0) return { ok: true, value: body.id };
  return { ok: false, message: 'no task id in the answer' };
}

function parseError(value: unknown): UpstreamError | undefined {
  if (!isRecord(value)) return undefined;
  const code = typeof value.code === 'string' ? value.code : undefined;
  const message = typeof value.message === 'string' ? value.message : undefined;
  if (code === undefined && message === undefined) return undefined;
  return { code: code ?? 'unknown', message: message ?? '' };
}

/** An HTTP error answer's `{ error: { code, message } }`, if it has one. */
export function parseErrorBody(text: string): UpstreamError | undefined {
  const json = parseJson(text);
  return json.ok && isRecord(json.value) ? parseError(json.value.error) : undefined;
}

/** The query answer. Rejects anything we could not act on safely. */
export function parseTask(body: unknown): Parsed<UpstreamTask> {
  if (!isRecord(body)) return { ok: false, message: 'the task answer is not an object' };
  const { id, status } = body;
  if (typeof id !== 'string' || id.length === 0) return { ok: false, message: 'the task answer has no id' };
  if (typeof status !== 'string' || !(TASK_STATUSES as readonly string[]).includes(status)) {
    return { ok: false, message: `unknown task status ${JSON.stringify(status)}` };
  }
  const task: UpstreamTask = { id, status: status as TaskStatus };
  const error = parseError(body.error);
  if (error) task.error = error;
  if (task.status === 'succeeded') {
    const url = isRecord(body.content) ? body.content.video_url : undefined;
    if (typeof url !== 'string' || !/^https?:\/\//i.test(url)) {
      return { ok: false, message: 'a succeeded task without an http(s) content.video_url' };
    }
    task.videoUrl = url;
  }
  if (isRecord(body.usage)) {
    const count = (value: unknown) => (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null);
    task.usage = { completionTokens: count(body.usage.completion_tokens), totalTokens: count(body.usage.total_tokens) };
  }
  return { ok: true, value: task };
}

/**
 * The list answer (`GET …/tasks?filter.task_ids=…`): `{ items: [task…], total }`. One malformed
 * item fails the whole answer: acting on part of a page we cannot read is not safe.
 */
export function parseList(body: unknown): Parsed<UpstreamTask[]> {
  if (!isRecord(body) || !Array.isArray(body.items)) return { ok: false, message: 'the list answer has no items array' };
  const tasks: UpstreamTask[] = [];
  for (const item of body.items) {
    const parsed = parseTask(item);
    if (!parsed.ok) return parsed;
    tasks.push(parsed.value);
  }
  return { ok: true, value: tasks };
}

/**
 * Whether a refused create is the channel's problem rather than the task's, so that another channel
 * may take it: a rate or concurrency limit (429), the upstream failing (5xx), our account's key,
 * quota or balance (401, 403, and the quota/overdue codes on any status), or a model this account
 * cannot use (not enabled, or an endpoint id of another account: `ModelNotOpen`, `InvalidEndpointOrModel`).
 */
export function isChannelProblem(status: number, code: string | undefined): boolean {
  if (status === 429 || status >= 500 || status === 401 || status === 403) return true;
  return code !== undefined && /quota|ratelimit|overdue|insufficient|serveroverloaded|accountsuspended|modelnotopen|invalidendpointormodel/i.test(code);
}

/**
 * Whether an upstream code means the content was refused by moderation (input or output). The
 * documented codes all carry `SensitiveContent` (…Detected, ….PrivacyInformation, …) or end in
 * `RiskDetection`; `ContentSecurityDetectionError` is the moderation service failing, not a verdict.
 */
export function isModerationCode(code: string): boolean {
  return /SensitiveContent/i.test(code) || /RiskDetection$/i.test(code);
}
