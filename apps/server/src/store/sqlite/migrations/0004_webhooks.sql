-- Webhooks: an outbox of deliveries (one per terminal task with a webhookUrl,
-- written in the transaction that makes the task terminal), every attempt
-- recorded, and signing secrets that can rotate with an overlap.

CREATE TABLE webhook_deliveries (
  -- msg_…: the webhook-id header, the same on every attempt.
  id              TEXT PRIMARY KEY,
  task_id         TEXT NOT NULL UNIQUE REFERENCES tasks (id),
  account_id      TEXT NOT NULL REFERENCES accounts (id),
  url             TEXT NOT NULL,
  event_type      TEXT NOT NULL,
  -- The exact body sent (and signed) on every attempt.
  body            TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  last_attempt_at INTEGER,
  next_attempt_at INTEGER,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX webhook_deliveries_by_account ON webhook_deliveries (account_id, created_at DESC);

CREATE TABLE webhook_attempts (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  delivery_id  TEXT NOT NULL REFERENCES webhook_deliveries (id),
  attempted_at INTEGER NOT NULL,
  status_code  INTEGER,
  error        TEXT,
  duration_ms  INTEGER NOT NULL
) STRICT;
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id);

ALTER TABLE accounts ADD COLUMN previous_webhook_secret TEXT;
ALTER TABLE accounts ADD COLUMN previous_webhook_secret_until INTEGER;

-- Jobs gain a kind (generate a video, deliver a webhook): one job per task and kind.
CREATE TABLE jobs_new (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id      TEXT NOT NULL REFERENCES tasks (id),
  kind         TEXT NOT NULL CHECK (kind IN ('generate', 'deliver')),
  provider     TEXT NOT NULL,
  state        TEXT NOT NULL CHECK (state IN ('available', 'leased', 'done', 'dead')),
  attempts     INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  run_at       INTEGER NOT NULL,
  lease_until  INTEGER,
  leased_by    TEXT,
  last_error   TEXT,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  UNIQUE (task_id, kind)
) STRICT;
INSERT INTO jobs_new (id, task_id, kind, provider, state, attempts, max_attempts, run_at, lease_until, leased_by, last_error, created_at, updated_at)
  SELECT id, task_id, 'generate', provider, state, attempts, max_attempts, run_at, lease_until, leased_by, last_error, created_at, updated_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_claimable_by_provider ON jobs (provider, state, run_at) WHERE state IN ('available', 'leased');

-- What every task read sees: the task and its webhook's progress.
CREATE VIEW tasks_with_webhook AS
  SELECT t.*, d.status AS webhook_status, d.attempts AS webhook_attempts, d.last_attempt_at AS webhook_last_attempt_at
  FROM tasks t LEFT JOIN webhook_deliveries d ON d.task_id = t.id;
