/**
 * The store port: everything the service keeps. SQLite implements it now and
 * PostgreSQL later; both must pass the same conformance tests. Every method
 * that changes credits or a task's status is one transaction.
 */
import type { AspectRatio, GenerationMode, ModelId, Resolution } from '../domain/catalog.js';
import type { KeyMode, Scope } from '../domain/keys.js';
import type { TaskState } from '../domain/states.js';

export interface AccountRecord {
  id: string;
  name: string;
  balance: number;
  createdAt: Date;
}

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  hint: string;
  mode: KeyMode;
  scopes: Scope[];
  name: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

/**
 * An operator-redelivery count no delivery has (recordDeliveryAttempt settles a delivery only when its `redeliveries`
 * match): an attempt recorded with it is counted and settles nothing.
 */
export const SETTLES_NOTHING = -1;

/** A key as found for authentication: with its stored hash, which nothing else returns. */
export type StoredApiKey = ApiKeyRecord & { hash: string };

export interface TaskRecord {
  id: string;
  accountId: string;
  status: TaskState;
  model: ModelId;
  prompt: string;
  duration: number;
  aspectRatio: AspectRatio;
  resolution: Resolution;
  mode: GenerationMode;
  mediaUrls: string[];
  metadata: Record<string, unknown> | null;
  webhookUrl: string | null;
  creditsCharged: number;
  creditsRefunded: number;
  outputUrl: string | null;
  outputExpiresAt: Date | null;
  /** Where the output file is kept (FileStorage key); null once swept. */
  outputKey: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
  /** The task fails with `timeout` if it is not terminal by then (D7). */
  deadlineAt: Date | null;
  /** Its webhook's progress, once the event exists (the task is terminal and has a webhookUrl). */
  webhook: { status: DeliveryStatus; attempts: number; lastAttemptAt: Date | null } | null;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One webhook event for one terminal task, sent until delivered, gone (410) or out of retries. */
export interface DeliveryRecord {
  /** msg_…: the webhook-id header, the same on every attempt. */
  id: string;
  taskId: string;
  accountId: string;
  url: string;
  eventType: string;
  body: string;
  status: DeliveryStatus;
  attempts: number;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  createdAt: Date;
  /** Operator redeliveries so far: an attempt read before one settles nothing (recordDeliveryAttempt). */
  redeliveries: number;
}

export interface DeliveryAttempt {
  attemptedAt: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

export type NewTask = Pick<
  TaskRecord,
  | 'id'
  | 'accountId'
  | 'model'
  | 'prompt'
  | 'duration'
  | 'aspectRatio'
  | 'resolution'
  | 'mode'
  | 'mediaUrls'
  | 'metadata'
  | 'webhookUrl'
  | 'creditsCharged'
  | 'deadlineAt'
>;

export type StartOutcome = { kind: 'started'; task: TaskRecord } | { kind: 'not_startable'; status: TaskState | undefined };
/** A pending delivery with the secrets to sign it with now: what a webhook attempt needs (Store.pendingDelivery). */
export interface PendingDelivery {
  delivery: DeliveryRecord;
  secrets: string[];
}
/**
 * `heldDelivery`: the claim (the queue's job id) of the task's webhook delivery, held by the caller from its birth
 * (completeTask's `holdDelivery`). `pendingDelivery`: that delivery as written and the account's secrets, read in the
 * same transaction (PostgreSQL: answered by the statement that writes the delivery): its first attempt then needs no read
 * of its own.
 */
export type CompleteOutcome =
  | { kind: 'succeeded'; task: TaskRecord; heldDelivery?: string; pendingDelivery?: PendingDelivery }
  | { kind: 'discarded'; status: TaskState | undefined };
export type FailOutcome = { kind: 'failed'; task: TaskRecord } | { kind: 'already_terminal'; status: TaskState | undefined };

/**
 * An upstream task: the remote provider's side of a task (one row per task routed there). Written
 * `creating` with its channel before the create is sent, `following` with the upstream id the moment
 * the create answers, `downloading` once the upstream succeeded, `ended` with its outcome.
 */
export type UpstreamState = 'creating' | 'following' | 'downloading' | 'ended';
/**
 * How an upstream task ended: as the upstream ended it (`succeeded`, `failed`, `expired`, `cancelled`),
 * `discarded` (it finished upstream after our task had ended: paid for, thrown away), `refused` (the
 * create was refused for good), `lost` (the create's answer never came: it may exist upstream).
 */
export type UpstreamOutcome = 'succeeded' | 'failed' | 'expired' | 'cancelled' | 'discarded' | 'refused' | 'lost';

export interface UpstreamUsage {
  completionTokens: number | null;
  totalTokens: number | null;
}

export interface UpstreamTaskRecord {
  taskId: string;
  channel: string;
  state: UpstreamState;
  upstreamId: string | null;
  /** As last seen: queued, running, succeeded, failed, cancelled, expired. */
  upstreamStatus: string | null;
  outcome: UpstreamOutcome | null;
  videoUrl: string | null;
  usage: UpstreamUsage | null;
  nextCheckAt: Date | null;
  downloadAttempts: number;
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
  /** Our task's status: work for a task that has ended stops (cancel upstream, discard the result). */
  taskStatus: TaskState;
}

/** A channel (one upstream account and region) as the store knows it: what it has in flight and its health. */
export interface UpstreamChannelRecord {
  name: string;
  /** Upstream tasks of ours on it that are creating or queued/running upstream. */
  inFlight: number;
  consecutiveFailures: number;
  /** Skipped for new creates until then. */
  cooldownUntil: Date | null;
  lastError: string | null;
  lastErrorAt: Date | null;
  creates: number;
  createFailures: number;
  lostCreates: number;
  discardedResults: number;
}

export type ReserveUpstreamOutcome =
  /** A slot on `channel` is this task's: send the create. */
  | { kind: 'reserved'; channel: string; task: TaskRecord }
  /** Every channel offered is full: the task stays queued. */
  | { kind: 'full' }
  /** The task has its upstream row already (a job claimed again): never create twice. */
  | { kind: 'exists'; upstream: UpstreamTaskRecord }
  /** The task is no longer queued (cancelled, timed out): nothing to create. */
  | { kind: 'not_queued'; status: TaskState | undefined };

/** Upstream usage against credits, per channel and model (the cost report). */
export interface UpstreamUsageRow {
  channel: string;
  model: string;
  tasks: number;
  succeeded: number;
  completionTokens: number;
  totalTokens: number;
  creditsCharged: number;
  creditsRefunded: number;
}

export interface LedgerEntry {
  id: number;
  accountId: string;
  kind: 'grant' | 'charge' | 'refund';
  amount: number;
  /** The account's balance right after this entry. */
  balanceAfter: number;
  taskId: string | null;
  note: string | null;
  createdAt: Date;
}

/** One hour's running totals of an account's usage for one model (UTC hours). */
export interface UsageHour {
  hourStart: Date;
  model: string;
  creditsCharged: number;
  creditsRefunded: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  secondsDelivered: number;
}

/** A stored answer to replay for an Idempotency-Key. */
export interface StoredResponse {
  status: number;
  body: unknown;
}

export interface IdempotencyClaim {
  key: string;
  /** SHA-256 of the canonical request; a replay must match it. */
  fingerprint: string;
  expiresAt: Date;
}

export type SubmitOutcome =
  | { kind: 'created'; task: TaskRecord; response: StoredResponse }
  | { kind: 'replayed'; response: StoredResponse }
  | { kind: 'insufficient_credits'; required: number; available: number }
  | { kind: 'too_many_active_tasks'; limit: number }
  | { kind: 'idempotency_key_reused' }
  | { kind: 'idempotency_in_progress' };

export type CancelOutcome =
  | { kind: 'cancelled'; task: TaskRecord }
  | { kind: 'already_cancelled'; task: TaskRecord }
  | { kind: 'invalid_state'; status: TaskState }
  | { kind: 'not_found' };

export interface TaskPageQuery {
  accountId: string;
  status?: TaskState;
  limit: number;
  /** Position after which to continue (exclusive), newest first. */
  after?: { createdAt: Date; id: string };
}

/**
 * One task of a page (`listTaskPage`): its page key (domain/task-view.ts's `taskPageKeyOf`: its id, creation time and
 * version), and its record, or instead what the caller's `known` gave for the key (what it keeps of the task already).
 */
export type TaskPageEntry<Known> = { key: string; task: TaskRecord; known?: undefined } | { key: string; task?: undefined; known: Known };

export interface Store {
  migrate(): Promise<void>;
  /** Throws when the store cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;

  createAccount(input: { id: string; name: string; webhookSecret: string; openingGrant: number; now: Date }): Promise<AccountRecord>;
  getAccount(id: string): Promise<AccountRecord | undefined>;
  listAccounts(): Promise<AccountRecord[]>;
  countAccounts(): Promise<number>;
  grantCredits(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<AccountRecord | undefined>;
  listLedger(accountId: string): Promise<LedgerEntry[]>;
  /** Newest first, before entry `beforeId` (exclusive), optionally of one kind or one task. */
  listLedgerPage(query: { accountId: string; limit: number; beforeId?: number; kind?: LedgerEntry['kind']; taskId?: string }): Promise<LedgerEntry[]>;
  /** The account with what its active tasks hold: credits charged for queued and processing tasks, and how many. */
  accountSummary(accountId: string): Promise<{ account: AccountRecord; creditsHeld: number; activeTasks: number } | undefined>;
  /** The running usage totals of the hours in [from, to), oldest first (hours with nothing are absent). */
  usageHours(query: { accountId: string; from: Date; to: Date }): Promise<UsageHour[]>;
  /**
   * The same totals summed in the database per bucket of `bucketMs` from `from` (and per model with `byModel`; else
   * `model` is `*`): `hourStart` is the bucket's start. What the usage answer needs, without reading every hour.
   */
  usageTotals(query: { accountId: string; from: Date; to: Date; bucketMs: number; byModel: boolean }): Promise<UsageHour[]>;
  /** The balance column and the sum of the ledger, which must always be equal. */
  auditBalance(accountId: string): Promise<{ balance: number; ledgerSum: number } | undefined>;

  createApiKey(input: Omit<ApiKeyRecord, 'revokedAt'> & { hash: string }): Promise<ApiKeyRecord>;
  findApiKeyByHash(hash: string): Promise<StoredApiKey | undefined>;
  listApiKeys(accountId: string): Promise<ApiKeyRecord[]>;
  revokeApiKey(input: { id: string; now: Date }): Promise<ApiKeyRecord | undefined>;

  /**
   * Claims the idempotency key (if any), charges the price with a conditional
   * balance update, inserts the task and its ledger row: all or nothing.
   * `respond` renders the answer to store for replays.
   */
  submitTask(input: {
    task: NewTask;
    /** The task's generation job, enqueued in the same transaction. */
    job: { maxAttempts: number; provider: string };
    idempotency: IdempotencyClaim | null;
    /** Queued and processing tasks the account may have at once, this one included; null: no cap. Checked in the same transaction. */
    maxActiveTasks?: number | null;
    now: Date;
    respond: (task: TaskRecord) => StoredResponse;
  }): Promise<SubmitOutcome>;
  getTask(accountId: string, id: string): Promise<TaskRecord | undefined>;
  /** For operators: a task of any account. */
  findTask(id: string): Promise<TaskRecord | undefined>;
  listTasks(query: TaskPageQuery): Promise<TaskRecord[]>;
  /**
   * The same page as `listTasks`, each task with its page key; a task for which `known(key)` gives a value may come
   * with that value instead of its record (the caller keeps what it needs of the task at that key already), so a store
   * may read only what the keys need and the records of the others. Every entry is read in one snapshot.
   */
  listTaskPage<Known>(query: TaskPageQuery, known: (key: string) => Known | undefined): Promise<TaskPageEntry<Known>[]>;
  /** Moves a queued or processing task to cancelled and refunds it, exactly once. */
  cancelTask(input: { accountId: string; id: string; now: Date }): Promise<CancelOutcome>;
  /**
   * Every task by status, read without reading every task (`/metrics` asks at each scrape): the queued and processing
   * ones counted, the ended ones as the usage totals counted their endings (each in its ending's transaction).
   */
  countTasksByStatus(): Promise<Record<TaskState, number>>;

  // The lifecycle moves a worker makes (the API's only move is cancelTask).
  /** queued → processing; also a processing task whose worker died (its job was claimed again). */
  startTask(input: { id: string; now: Date }): Promise<StartOutcome>;
  /**
   * processing → succeeded with its output; discarded if the task was cancelled (or ended) meanwhile. `job`: the claim
   * of the task's job (the queue's job id) that rendered it, completed in the same transaction when the task succeeds
   * (if that claim still holds it); a discarded task's job is left to its claim. `started`: the task as startTask
   * answered the claim, which a store may use to complete it in fewer round trips while nothing has changed it since;
   * the outcome is the same with it or without it. `holdDelivery`: the caller (worker `workerId`) will attempt the
   * task's webhook itself, so the store writes the delivery's queue entry (PostgreSQL: the delivery's own row; SQLite:
   * its `deliver` job) already claimed by the caller, leased until `leaseUntil`, and answers the claim (`heldDelivery`):
   * no claim round for it, and no other process woken for it. A caller that dies lets the lease run out, and another
   * claims it.
   */
  completeTask(input: {
    id: string;
    now: Date;
    outputKey: string;
    outputUrl: string;
    outputExpiresAt: Date;
    job?: string;
    started?: TaskRecord;
    holdDelivery?: { leaseUntil: Date; workerId: string };
  }): Promise<CompleteOutcome>;
  /** queued | processing → failed, refunding the charge exactly once. */
  failTask(input: { id: string; now: Date; code: string; message: string }): Promise<FailOutcome>;
  /** Fails every task past its deadline with `timeout` (refunded); returns them. */
  expireOverdueTasks(input: { now: Date; limit: number }): Promise<TaskRecord[]>;
  // Webhooks. The event is written by completeTask, failTask and cancelTask themselves (an outbox).
  getDelivery(id: string): Promise<DeliveryRecord | undefined>;
  getDeliveryForTask(taskId: string): Promise<DeliveryRecord | undefined>;
  /** The task's delivery if it is pending, with the secrets to sign it with now (as webhookSecrets): what an attempt reads, in one read. */
  pendingDelivery(taskId: string, now: Date): Promise<PendingDelivery | undefined>;
  listDeliveries(accountId: string, limit: number): Promise<DeliveryRecord[]>;
  /** Newest first, after a position (exclusive), optionally by status or task. */
  listDeliveriesPage(query: { accountId: string; limit: number; status?: DeliveryStatus; taskId?: string; after?: { createdAt: Date; id: string } }): Promise<DeliveryRecord[]>;
  /** The signing secret now, and until when the previous one also signs (null when it no longer does). */
  webhookSecretState(accountId: string, now: Date): Promise<{ secret: string; previousSecretValidUntil: Date | null } | undefined>;
  listDeliveryAttempts(deliveryId: string): Promise<DeliveryAttempt[]>;
  /**
   * Records one attempt and where the delivery now stands, unless an operator redelivered it since
   * the attempt read it (`redeliveries` as read): then the attempt is recorded and counted, and the
   * delivery stays as the redelivery left it. `job`: the claim (the queue's job id) that made the attempt,
   * whose job is completed in the same transaction; if that claim no longer holds its job (its lease ran
   * out and another claim has it, or a redelivery cancelled it), the attempt is recorded and counted,
   * settles nothing, and false is answered. True otherwise.
   */
  recordDeliveryAttempt(input: {
    deliveryId: string;
    redeliveries: number;
    attempt: DeliveryAttempt;
    status: DeliveryStatus;
    nextAttemptAt: Date | null;
    job?: { id: string; now: Date };
  }): Promise<boolean>;
  /** Sends a delivery again from now (operators): pending, with its job available. */
  redeliver(input: { deliveryId: string; now: Date }): Promise<DeliveryRecord | undefined>;
  /** The secrets to sign with now: the current one, and the previous one during a rotation. */
  webhookSecrets(accountId: string, now: Date): Promise<string[]>;
  rotateWebhookSecret(input: { accountId: string; secret: string; previousValidUntil: Date }): Promise<boolean>;

  /** Succeeded tasks whose output file has expired and is still kept. */
  listExpiredOutputs(input: { now: Date; limit: number }): Promise<{ id: string; outputKey: string }[]>;
  /** Forgets a swept output file. */
  clearOutputKey(id: string): Promise<void>;
  /** Deletes up to `limit` Idempotency-Keys whose replay window has passed; how many it deleted. */
  purgeExpiredIdempotencyKeys(input: { now: Date; limit: number }): Promise<number>;

  // Upstream tasks (the remote provider). A cancel or a failure of the task makes its upstream row due
  // for a check at once (cancelTask, failTask), so that the follower stops or discards it.
  /**
   * Takes a slot for a queued task on the first of `channels` (in order) whose upstream tasks in flight are
   * under its limit, writing its `creating` row: one transaction, so concurrent workers never overfill a channel.
   */
  reserveUpstream(input: { taskId: string; channels: { name: string; limit: number }[]; now: Date }): Promise<ReserveUpstreamOutcome>;
  /**
   * The create was refused before the upstream took anything (429, 5xx, a quota error, unreachable): the row
   * goes and the slot with it, so the task can go to another channel. `countFailure` counts it against the
   * channel: `cooldownAfter` failures in a row put it in a cool-down of `cooldownMs`.
   */
  releaseUpstreamReservation(input: { taskId: string; channel: string; error: string; now: Date; countFailure: boolean; cooldownAfter: number; cooldownMs: number }): Promise<void>;
  /**
   * The create answered with the upstream id: recorded (`following`, next check at `nextCheckAt`), the channel's
   * failures in a row reset, and the task moved queued → processing. A task that ended meanwhile is checked at once.
   */
  recordUpstreamCreated(input: { taskId: string; upstreamId: string; now: Date; nextCheckAt: Date }): Promise<{ task: TaskRecord | undefined; started: boolean }>;
  /**
   * Ends the upstream row with `outcome`, and in the same transaction completes the task (`complete`; a task
   * that ended meanwhile makes the outcome `discarded`) or fails it refunded (`fail`). `changed`: the task moved.
   */
  endUpstream(input: {
    taskId: string;
    now: Date;
    outcome: UpstreamOutcome;
    upstreamStatus?: string;
    error?: string;
    fail?: { code: string; message: string };
    complete?: { outputKey: string; outputUrl: string; outputExpiresAt: Date };
  }): Promise<{ task: TaskRecord | undefined; changed: boolean; outcome: UpstreamOutcome }>;
  /** Up to `limit` due rows to query (`check`: following) or to download (`download`), each leased to `workerId`. */
  claimUpstreamWork(input: { kind: 'check' | 'download'; workerId: string; now: Date; leaseMs: number; limit: number }): Promise<UpstreamTaskRecord[]>;
  /** Keeps a download's lease; false when the row is no longer this worker's. */
  extendUpstreamLease(input: { taskId: string; workerId: string; now: Date; leaseMs: number }): Promise<boolean>;
  /** Queried: the status seen and the next check; the lease is given back. */
  recordUpstreamChecks(input: { workerId: string; now: Date; checks: { taskId: string; upstreamStatus: string; nextCheckAt: Date; error?: string }[] }): Promise<void>;
  /** Succeeded upstream: `downloading`, due now, with the video URL and the upstream's usage. */
  markUpstreamSucceeded(input: { taskId: string; videoUrl: string; usage: UpstreamUsage | null; now: Date }): Promise<void>;
  /** A download failed: tried again at `nextAt`, counted. */
  retryUpstreamDownload(input: { taskId: string; now: Date; nextAt: Date; error: string }): Promise<void>;
  /** A hint (the upstream's callback): query the task at once. False when it is not being followed. */
  requestUpstreamCheck(input: { taskId: string; now: Date }): Promise<boolean>;
  getUpstreamTask(taskId: string): Promise<UpstreamTaskRecord | undefined>;
  /** Every channel that has had an upstream task, with what it has in flight. */
  listUpstreamChannels(): Promise<UpstreamChannelRecord[]>;
  /** Tasks created in [from, to) that went upstream, summed per channel and model. */
  upstreamUsageReport(input: { from: Date; to: Date }): Promise<UpstreamUsageRow[]>;
}
