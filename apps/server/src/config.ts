/**
 * Configuration from environment variables, validated at start. Every
 * variable is documented in the README's "Configuration" table.
 */
import { resolve } from 'node:path';
import { MODEL_IDS, parsePriceTable, type ModelId, type PriceTable } from './domain/catalog.js';
import { ChannelConfigError, parseChannels, type ChannelConfig } from './upstream/channels.js';
import { DEFAULT_RETRY_SCHEDULE_MS, parseRetrySchedule } from './webhooks/deliveries.js';

export interface Config {
  /** PORT: the HTTP port (default 8080; 0 lets the OS choose). */
  port: number;
  /** HOST: the address to listen on (default 0.0.0.0). */
  host: string;
  /** VIDGEN_DATA_DIR: where the SQLite file (and, later, output files) live (default ./data). */
  dataDir: string;
  /**
   * VIDGEN_DATABASE_URL: `sqlite:<path>` (default sqlite:<data dir>/vidgen.db) or `postgres://…`; VIDGEN_DATABASE_POOL_SIZE: PostgreSQL
   * connections per process (default 10); VIDGEN_DATABASE_KEEP_PLANS: PostgreSQL plans of the hot statements prepared once per
   * connection (default true; false behind a pooler that does not keep a session's prepared statements).
   * VIDGEN_SQLITE_CACHE_MB: SQLite's page cache in the process, MiB (default 2, SQLite's own): pages a read finds there need
   * no read from the operating system, whose page cache may have given them up (BENCHMARKS.md, twenty-eighth pass).
   * VIDGEN_SQLITE_MMAP_MB: the first MiB of the SQLite file read through a memory map instead of read() (default 0, off,
   * SQLite's own; at most 2047, SQLite's limit on Linux): pages in use stay in the page cache on a host that gives up
   * file pages it does not see mapped and used (BENCHMARKS.md, twenty-ninth pass); off by default, as the pages it maps
   * count in the process's RSS (thirtieth pass).
   */
  database: { kind: 'sqlite'; path: string; cacheMb?: number; mmapMb?: number } | { kind: 'postgres'; url: string; poolSize: number; keepPlans?: boolean };
  /** VIDGEN_ROLE or `--role`: `all` (API and worker, the default), `api` or `worker`; the split roles need PostgreSQL. */
  role: Role;
  /** VIDGEN_PRICES: JSON overriding credits per second, e.g. {"vidgen-2.0":{"1080p":20}}. */
  prices: PriceTable;
  /** VIDGEN_RATE_LIMIT_SUBMITS / VIDGEN_RATE_LIMIT_READS: requests per key per minute (defaults 60 and 600; 0: no limit). */
  rateLimits: { submit: number; read: number; windowMs: number };
  /** VIDGEN_MAX_ACTIVE_TASKS: queued and processing tasks an account may have at once (default 20; 0: no cap). */
  maxActiveTasks: number;
  /** VIDGEN_IDEMPOTENCY_TTL_HOURS: how long Idempotency-Key answers are replayed (default 24). */
  idempotencyTtlMs: number;
  /** VIDGEN_KEY_CACHE_SECONDS: how long an API key's record is reused before it is read again, so the most a revocation takes to apply (default 5; 0: read every request). */
  keyCacheMs: number;
  /** VIDGEN_LOG_LEVEL: pino level (default info; silent for none). */
  logLevel: string;
  /** VIDGEN_DEV_BOOTSTRAP: on an empty store, create a development account and print its key (default on unless NODE_ENV=production). */
  devBootstrap: boolean;
  /** VIDGEN_DEV_CREDITS: credits of that development account (default 100000). */
  devCredits: number;
  /** VIDGEN_PUBLIC_BASE_URL: the base of output file URLs (default http://127.0.0.1:<port>; required by a worker with local storage, which serves none). */
  publicBaseUrl: string | undefined;
  /** VIDGEN_FILE_URL_SECRET: signs output URLs (default: made once, kept in the data dir). */
  fileUrlSecret: string | undefined;
  /** VIDGEN_OUTPUT_TTL_HOURS: how long output files are served (default 168 = 7 days, also the most for s3). */
  outputTtlMs: number;
  /** VIDGEN_STORAGE: where output files are kept, `local` (the data dir, served at /files) or `s3` (default local). */
  storage: StorageConfig;
  /** VIDGEN_TASK_DEADLINE_MINUTES: a task not terminal by then fails with timeout (default 30). */
  taskDeadlineMs: number;
  /** VIDGEN_JOB_MAX_ATTEMPTS: claims of a task's job before it is given up (default 3). */
  jobMaxAttempts: number;
  /** VIDGEN_WORKER: whether a process of the role all runs a worker (default true). */
  worker: boolean;
  /**
   * VIDGEN_LOCAL_CONCURRENCY / VIDGEN_UPSTREAM_CREATE_CONCURRENCY / VIDGEN_INSTANT_CONCURRENCY: jobs of each provider's lane run
   * at once in this process (defaults 1, 16 and 64). For `byteplus` a job only creates the upstream task; following it takes no slot.
   */
  concurrency: Record<ProviderName, number>;
  /**
   * VIDGEN_CLAIM_INTERVAL_MS: under load (work announced while a worker's claim of more than one job was under way) its
   * next claim waits until this long after the last one began, taking what came meanwhile in one go; work announced to
   * an idle worker, or after a claim of one job or none, is claimed at once; and so is work of a lane whose last claim got
   * all it asked for, once half its slots are free (they would stand idle). Default 25 on PostgreSQL, where a claim is a
   * query PostgreSQL plans and runs (0.4 ms of its CPU: with the default it spent 12–19 % less CPU a task in the
   * pipeline benchmark, BENCHMARKS.md), 0 on SQLite, where claiming at once measured faster.
   */
  claimIntervalMs: number;
  /** VIDGEN_JOB_LEASE_SECONDS: a claimed job returns to the queue this long after its worker stops renewing it (default 60). */
  jobLeaseMs: number;
  /** VIDGEN_SHUTDOWN_GRACE_SECONDS: on SIGTERM, how long running renders may take to finish before they are handed back (default 25). */
  shutdownGraceMs: number;
  /** VIDGEN_PROVIDERS: JSON model → provider (`local`, `byteplus`, or `instant` for benchmarks); default every model on `local`. */
  providers: Record<ModelId, ProviderName>;
  /** VIDGEN_INSTANT_DELAY_MS: how long the instant provider takes per task (default 0). */
  instantDelayMs: number;
  /** The upstream (models routed to `byteplus`): its channels and how they are followed (README "The upstream"). */
  upstream: UpstreamConfig;
  /** VIDGEN_MEDIA_ALLOW_LOOPBACK (tests only, default false) and VIDGEN_MEDIA_CA_FILE: reference fetching. */
  media: { allowLoopback: boolean; caFile: string | undefined };
  /** Webhook delivery: VIDGEN_WEBHOOK_RETRY_SCHEDULE, _TIMEOUT_MS, _CONCURRENCY, _ALLOW_LOOPBACK (tests only), _CA_FILE. */
  webhooks: { retryScheduleMs: number[]; timeoutMs: number; concurrency: number; allowLoopback: boolean; caFile: string | undefined };
  /** How long a client may take to send a request, and to keep an idle connection (http/node-server.ts). */
  http: HttpTimeouts;
}

export interface UpstreamConfig {
  /** VIDGEN_UPSTREAM_CHANNELS / _CHANNELS_FILE, or the single VIDGEN_BYTEPLUS_BASE_URL / _API_KEY / _MODELS / _MAX_IN_FLIGHT channel. */
  channels: ChannelConfig[];
  /** VIDGEN_UPSTREAM_POLL_SECONDS: how often each followed task is queried (default 5). */
  pollMs: number;
  /** VIDGEN_UPSTREAM_BATCH_SIZE: upstream task ids per list request (default 100, at most 500). */
  batchSize: number;
  /** VIDGEN_UPSTREAM_DOWNLOAD_CONCURRENCY: finished videos downloaded at once by this process (default 8). */
  downloadConcurrency: number;
  /** VIDGEN_UPSTREAM_DOWNLOAD_ATTEMPTS: downloads of one video before the task fails with provider_error (default 5). */
  downloadAttempts: number;
  /** VIDGEN_UPSTREAM_REQUEST_TIMEOUT_MS: one upstream API call (default 30000); a create unanswered by then is never sent again. */
  requestTimeoutMs: number;
  /** VIDGEN_UPSTREAM_COOLDOWN_AFTER / _COOLDOWN_SECONDS: failed creates in a row that put a channel in a cool-down, and its length (defaults 3 and 30). */
  cooldownAfter: number;
  cooldownMs: number;
}

export interface HttpTimeouts {
  /** VIDGEN_HEADERS_TIMEOUT_MS: to send the request line and headers (default 10000); slower: 408 and the socket closed. */
  headersTimeoutMs: number;
  /** VIDGEN_REQUEST_TIMEOUT_MS: to send the whole request, body included (default 30000; at least the headers timeout). Receiving only: a long poll's answer may take longer. */
  requestTimeoutMs: number;
  /** VIDGEN_KEEP_ALIVE_TIMEOUT_MS: an idle kept-alive connection is closed after this (default 5000; above a load balancer's idle timeout behind one). */
  keepAliveTimeoutMs: number;
}

export type StorageConfig = { kind: 'local' } | S3StorageConfig;

/** An S3-compatible bucket; credentials come from the AWS SDK's standard chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, …). */
export interface S3StorageConfig {
  kind: 's3';
  /** VIDGEN_S3_BUCKET: the bucket (required with VIDGEN_STORAGE=s3). */
  bucket: string;
  /** VIDGEN_S3_PREFIX: a folder inside the bucket for the `<taskId>.mp4` objects (default none). */
  prefix: string | undefined;
  /** VIDGEN_S3_ENDPOINT: the URL of an S3-compatible server (default AWS's endpoint for the region). */
  endpoint: string | undefined;
  /** VIDGEN_S3_REGION: the bucket's region (default us-east-1). */
  region: string;
  /** VIDGEN_S3_FORCE_PATH_STYLE: `<endpoint>/<bucket>/<key>` URLs instead of `<bucket>.<endpoint>/<key>`, as many S3-compatible servers need (default false). */
  forcePathStyle: boolean;
}

/** `instant` answers at once with a prepared MP4: benchmarks and tests only, never a default. */
export type ProviderName = 'local' | 'byteplus' | 'instant';
export type Role = 'all' | 'api' | 'worker';
export const ROLES: readonly Role[] = ['all', 'api', 'worker'];
export const PROVIDER_NAMES: readonly ProviderName[] = ['local', 'byteplus', 'instant'];

export class ConfigError extends Error {}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return value;
}

function boolean(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(env[name])}`);
}

function database(env: NodeJS.ProcessEnv, dataDir: string): Config['database'] {
  const url = env.VIDGEN_DATABASE_URL;
  const cacheMb = () => integer(env, 'VIDGEN_SQLITE_CACHE_MB', 2, 1, 65_536);
  const mmapMb = () => integer(env, 'VIDGEN_SQLITE_MMAP_MB', 0, 0, 2047);
  if (!url) return { kind: 'sqlite', path: resolve(dataDir, 'vidgen.db'), cacheMb: cacheMb(), mmapMb: mmapMb() };
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\//, '');
    if (!path) throw new ConfigError('VIDGEN_DATABASE_URL sqlite: needs a file path, e.g. sqlite:./data/vidgen.db');
    return { kind: 'sqlite', path: path === ':memory:' ? path : resolve(path), cacheMb: cacheMb(), mmapMb: mmapMb() };
  }
  if (/^postgres(ql)?:\/\//.test(url)) {
    try {
      new URL(url);
    } catch {
      throw new ConfigError('VIDGEN_DATABASE_URL is not a valid postgres:// URL');
    }
    return { kind: 'postgres', url, poolSize: integer(env, 'VIDGEN_DATABASE_POOL_SIZE', 10, 1, 500), keepPlans: boolean(env, 'VIDGEN_DATABASE_KEEP_PLANS', true) };
  }
  throw new ConfigError(`VIDGEN_DATABASE_URL must start with sqlite: or postgres://, got ${JSON.stringify(url.replace(/\/\/[^@/]*@/, '//…@'))}`);
}

function role(env: NodeJS.ProcessEnv, databaseKind: Config['database']['kind']): Role {
  const value = (env.VIDGEN_ROLE || 'all') as Role;
  if (!ROLES.includes(value)) throw new ConfigError(`VIDGEN_ROLE (or --role) must be one of ${ROLES.join(', ')}; got ${JSON.stringify(env.VIDGEN_ROLE)}`);
  if (value !== 'all' && databaseKind !== 'postgres') {
    throw new ConfigError(`the ${value} role runs beside other processes and needs PostgreSQL (VIDGEN_DATABASE_URL=postgres://…); with SQLite run the role all`);
  }
  return value;
}

function modelMap<T extends string>(env: NodeJS.ProcessEnv, name: string, fallback: T, allowed?: readonly T[]): Record<ModelId, T> {
  const map = Object.fromEntries(MODEL_IDS.map((id) => [id, fallback])) as Record<ModelId, T>;
  const raw = env[name];
  if (!raw) return map;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError(`${name} must be a JSON object of model → value`);
  }
  if (!parsed || typeof parsed !== 'object') throw new ConfigError(`${name} must be a JSON object of model → value`);
  for (const [model, value] of Object.entries(parsed)) {
    if (!MODEL_IDS.includes(model as ModelId)) throw new ConfigError(`${name}: unknown model ${model}`);
    if (typeof value !== 'string' || (allowed && !allowed.includes(value as T))) {
      throw new ConfigError(`${name}: ${model} must be ${allowed ? `one of ${allowed.join(', ')}` : 'a string'}`);
    }
    map[model as ModelId] = value as T;
  }
  return map;
}

function retrySchedule(env: NodeJS.ProcessEnv): number[] {
  const raw = env.VIDGEN_WEBHOOK_RETRY_SCHEDULE;
  if (!raw) return DEFAULT_RETRY_SCHEDULE_MS;
  try {
    return parseRetrySchedule(raw);
  } catch (error) {
    throw new ConfigError(`VIDGEN_WEBHOOK_RETRY_SCHEDULE: ${(error as Error).message}`);
  }
}

function httpTimeouts(env: NodeJS.ProcessEnv): HttpTimeouts {
  const headersTimeoutMs = integer(env, 'VIDGEN_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000);
  const requestTimeoutMs = integer(env, 'VIDGEN_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  // Node refuses a headers timeout longer than the request timeout (it would never apply).
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(`VIDGEN_HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed VIDGEN_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  }
  return { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs: integer(env, 'VIDGEN_KEEP_ALIVE_TIMEOUT_MS', 5_000, 100, 600_000) };
}

function storage(env: NodeJS.ProcessEnv, outputTtlMs: number): StorageConfig {
  const kind = env.VIDGEN_STORAGE || 'local';
  if (kind === 'local') return { kind };
  if (kind !== 's3') throw new ConfigError(`VIDGEN_STORAGE must be local or s3, got ${JSON.stringify(env.VIDGEN_STORAGE)}`);
  const bucket = env.VIDGEN_S3_BUCKET;
  if (!bucket) throw new ConfigError('VIDGEN_STORAGE=s3 needs VIDGEN_S3_BUCKET, the bucket to keep output files in');
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new ConfigError(`VIDGEN_S3_BUCKET must be a bucket name (3 to 63 lowercase letters, digits, dots and hyphens), got ${JSON.stringify(bucket)}`);
  }
  const endpoint = env.VIDGEN_S3_ENDPOINT || undefined;
  if (endpoint && !(URL.canParse(endpoint) && /^https?:$/.test(new URL(endpoint).protocol))) throw new ConfigError(`VIDGEN_S3_ENDPOINT must be an http: or https: URL, got ${JSON.stringify(endpoint)}`);
  const region = env.VIDGEN_S3_REGION || 'us-east-1';
  if (!/^[a-z0-9-]+$/.test(region)) throw new ConfigError(`VIDGEN_S3_REGION must be a region name such as eu-west-1, got ${JSON.stringify(region)}`);
  // Clients download from the bucket at presigned URLs, which last at most 7 days (Signature V4).
  if (outputTtlMs > 168 * 3600_000) throw new ConfigError('VIDGEN_OUTPUT_TTL_HOURS can be at most 168 with VIDGEN_STORAGE=s3: presigned URLs last at most 7 days');
  return {
    kind,
    bucket,
    prefix: env.VIDGEN_S3_PREFIX || undefined,
    endpoint,
    region,
    forcePathStyle: boolean(env, 'VIDGEN_S3_FORCE_PATH_STYLE', false),
  };
}

/**
 * A `worker` writes each output's URL when its task completes, and with `local` storage that URL
 * is served by the `api` processes sharing the data dir: the worker listens on nothing, so its
 * own address (`http://127.0.0.1:<PORT>`, the default) would be stored in every task.
 */
function workerOutputUrls(role: Role, storage: StorageConfig, publicBaseUrl: string | undefined): void {
  if (role !== 'worker' || storage.kind !== 'local' || publicBaseUrl) return;
  throw new ConfigError(
    'the worker role with local storage needs VIDGEN_PUBLIC_BASE_URL: the address where clients reach the api process(es) that serve /files from the same data dir ' +
      '(e.g. https://vidgen.example.com, the load balancer in front of them); or keep outputs in a bucket with VIDGEN_STORAGE=s3',
  );
}

function upstream(env: NodeJS.ProcessEnv): UpstreamConfig {
  let channels: ChannelConfig[];
  try {
    channels = parseChannels(env, {
      baseUrl: env.VIDGEN_BYTEPLUS_BASE_URL || 'https://ark.ap-southeast.bytepluses.com/api/v3',
      apiKey: env.VIDGEN_BYTEPLUS_API_KEY || undefined,
      modelIds: modelMap<string>(env, 'VIDGEN_BYTEPLUS_MODELS', ''),
      // VIDGEN_BYTEPLUS_CONCURRENCY is the name this limit had when each task held a slot while followed.
      maxInFlight: integer(env, 'VIDGEN_BYTEPLUS_MAX_IN_FLIGHT', integer(env, 'VIDGEN_BYTEPLUS_CONCURRENCY', 100, 1, 100_000), 1, 100_000),
    });
  } catch (error) {
    if (error instanceof ChannelConfigError) throw new ConfigError(`upstream channels: ${error.message}`);
    throw error;
  }
  return {
    channels,
    pollMs: integer(env, 'VIDGEN_UPSTREAM_POLL_SECONDS', 5, 1, 600) * 1000,
    batchSize: integer(env, 'VIDGEN_UPSTREAM_BATCH_SIZE', 100, 1, 500),
    downloadConcurrency: integer(env, 'VIDGEN_UPSTREAM_DOWNLOAD_CONCURRENCY', 8, 1, 256),
    downloadAttempts: integer(env, 'VIDGEN_UPSTREAM_DOWNLOAD_ATTEMPTS', 5, 1, 50),
    requestTimeoutMs: integer(env, 'VIDGEN_UPSTREAM_REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
    cooldownAfter: integer(env, 'VIDGEN_UPSTREAM_COOLDOWN_AFTER', 3, 1, 1000),
    cooldownMs: integer(env, 'VIDGEN_UPSTREAM_COOLDOWN_SECONDS', 30, 1, 86_400) * 1000,
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const dataDir = resolve(env.VIDGEN_DATA_DIR || './data');
  let prices: PriceTable;
  try {
    prices = parsePriceTable(env.VIDGEN_PRICES);
  } catch (error) {
    throw new ConfigError(`VIDGEN_PRICES: ${(error as Error).message}`);
  }
  const logLevel = env.VIDGEN_LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`VIDGEN_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got ${JSON.stringify(logLevel)}`);
  }
  const outputTtlMs = integer(env, 'VIDGEN_OUTPUT_TTL_HOURS', 168, 1, 24 * 365) * 3600_000;
  const db = database(env, dataDir);
  const processRole = role(env, db.kind);
  const outputStorage = storage(env, outputTtlMs);
  workerOutputUrls(processRole, outputStorage, env.VIDGEN_PUBLIC_BASE_URL || undefined);
  return {
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: env.HOST || '0.0.0.0',
    dataDir,
    database: db,
    role: processRole,
    prices,
    rateLimits: {
      submit: integer(env, 'VIDGEN_RATE_LIMIT_SUBMITS', 60, 0, 1_000_000),
      read: integer(env, 'VIDGEN_RATE_LIMIT_READS', 600, 0, 10_000_000),
      windowMs: 60_000,
    },
    maxActiveTasks: integer(env, 'VIDGEN_MAX_ACTIVE_TASKS', 20, 0, 1_000_000),
    idempotencyTtlMs: integer(env, 'VIDGEN_IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 30) * 3600_000,
    keyCacheMs: integer(env, 'VIDGEN_KEY_CACHE_SECONDS', 5, 0, 3600) * 1000,
    logLevel,
    devBootstrap: boolean(env, 'VIDGEN_DEV_BOOTSTRAP', env.NODE_ENV !== 'production'),
    devCredits: integer(env, 'VIDGEN_DEV_CREDITS', 100_000, 0, Number.MAX_SAFE_INTEGER),
    publicBaseUrl: env.VIDGEN_PUBLIC_BASE_URL || undefined,
    fileUrlSecret: env.VIDGEN_FILE_URL_SECRET || undefined,
    outputTtlMs,
    storage: outputStorage,
    taskDeadlineMs: integer(env, 'VIDGEN_TASK_DEADLINE_MINUTES', 30, 1, 24 * 60) * 60_000,
    jobMaxAttempts: integer(env, 'VIDGEN_JOB_MAX_ATTEMPTS', 3, 1, 20),
    worker: boolean(env, 'VIDGEN_WORKER', true),
    concurrency: {
      local: integer(env, 'VIDGEN_LOCAL_CONCURRENCY', 1, 0, 64),
      byteplus: integer(env, 'VIDGEN_UPSTREAM_CREATE_CONCURRENCY', 16, 0, 1024),
      instant: integer(env, 'VIDGEN_INSTANT_CONCURRENCY', 64, 0, 1024),
    },
    claimIntervalMs: integer(env, 'VIDGEN_CLAIM_INTERVAL_MS', db.kind === 'postgres' ? 25 : 0, 0, 1000),
    jobLeaseMs: integer(env, 'VIDGEN_JOB_LEASE_SECONDS', 60, 1, 3600) * 1000,
    shutdownGraceMs: integer(env, 'VIDGEN_SHUTDOWN_GRACE_SECONDS', 25, 0, 3600) * 1000,
    providers: modelMap<ProviderName>(env, 'VIDGEN_PROVIDERS', 'local', PROVIDER_NAMES),
    instantDelayMs: integer(env, 'VIDGEN_INSTANT_DELAY_MS', 0, 0, 600_000),
    upstream: upstream(env),
    media: { allowLoopback: boolean(env, 'VIDGEN_MEDIA_ALLOW_LOOPBACK', false), caFile: env.VIDGEN_MEDIA_CA_FILE || undefined },
    webhooks: {
      retryScheduleMs: retrySchedule(env),
      timeoutMs: integer(env, 'VIDGEN_WEBHOOK_TIMEOUT_MS', 15_000, 100, 120_000),
      concurrency: integer(env, 'VIDGEN_WEBHOOK_CONCURRENCY', 8, 0, 256),
      allowLoopback: boolean(env, 'VIDGEN_WEBHOOK_ALLOW_LOOPBACK', false),
      caFile: env.VIDGEN_WEBHOOK_CA_FILE || undefined,
    },
    http: httpTimeouts(env),
  };
}
