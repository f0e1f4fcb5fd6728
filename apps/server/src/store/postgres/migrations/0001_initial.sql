-- The PostgreSQL schema: accounts, API keys, the credit ledger, tasks,
-- idempotency records and the webhook outbox. Jobs live in the job engine's
-- own schema (pg-boss), enqueued in the same transactions as these rows.
-- Times are timestamptz, always written from the service's clock.

CREATE TABLE accounts (
  id                            text PRIMARY KEY,
  name                          text NOT NULL,
  -- Kept equal to the sum of the account's ledger entries, in the same transactions.
  balance                       bigint NOT NULL CHECK (balance >= 0),
  webhook_secret                text NOT NULL,
  previous_webhook_secret       text,
  previous_webhook_secret_until timestamptz,
  created_at                    timestamptz NOT NULL
);

CREATE TABLE api_keys (
  id         text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  hash       text NOT NULL UNIQUE,
  hint       text NOT NULL,
  mode       text NOT NULL CHECK (mode IN ('live', 'test')),
  scopes     text NOT NULL,
  name       text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_by_account ON api_keys (account_id);

CREATE TABLE tasks (
  id                text PRIMARY KEY,
  account_id        text NOT NULL REFERENCES accounts (id),
  status            text NOT NULL CHECK (status IN ('queued', 'processing', 'succeeded', 'failed', 'cancelled')),
  model             text NOT NULL,
  prompt            text NOT NULL,
  duration          integer NOT NULL,
  aspect_ratio      text NOT NULL,
  resolution        text NOT NULL,
  mode              text NOT NULL,
  media_urls        jsonb NOT NULL,
  metadata          jsonb,
  webhook_url       text,
  credits_charged   bigint NOT NULL CHECK (credits_charged >= 0),
  credits_refunded  bigint NOT NULL DEFAULT 0 CHECK (credits_refunded >= 0),
  output_url        text,
  output_expires_at timestamptz,
  output_key        text,
  error_code        text,
  error_message     text,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  completed_at      timestamptz,
  deadline_at       timestamptz
);
-- Listing: newest first per account, optionally by status (keyset pagination).
CREATE INDEX tasks_by_account ON tasks (account_id, created_at DESC, id DESC);
CREATE INDEX tasks_by_account_status ON tasks (account_id, status, created_at DESC, id DESC);
-- The deadline sweep and the output sweep read these.
CREATE INDEX tasks_active_by_deadline ON tasks (deadline_at) WHERE status IN ('queued', 'processing');
CREATE INDEX tasks_outputs_by_expiry ON tasks (output_expires_at) WHERE output_key IS NOT NULL;

CREATE TABLE ledger_entries (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  kind       text NOT NULL CHECK (kind IN ('grant', 'charge', 'refund')),
  amount     bigint NOT NULL,
  task_id    text REFERENCES tasks (id),
  note       text,
  created_at timestamptz NOT NULL
);
CREATE INDEX ledger_by_account ON ledger_entries (account_id, id);
-- One charge and at most one refund per task, whatever the concurrency.
CREATE UNIQUE INDEX ledger_once_per_task ON ledger_entries (task_id, kind) WHERE task_id IS NOT NULL;

CREATE TABLE idempotency_keys (
  account_id      text NOT NULL REFERENCES accounts (id),
  key             text NOT NULL,
  fingerprint     text NOT NULL,
  response_status integer NOT NULL,
  response_body   jsonb NOT NULL,
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);

-- Webhooks: one delivery per terminal task with a webhookUrl, written in the
-- transaction that makes the task terminal; every attempt recorded.
CREATE TABLE webhook_deliveries (
  id              text PRIMARY KEY,
  task_id         text NOT NULL UNIQUE REFERENCES tasks (id),
  account_id      text NOT NULL REFERENCES accounts (id),
  url             text NOT NULL,
  event_type      text NOT NULL,
  -- The exact body sent (and signed) on every attempt.
  body            text NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  last_attempt_at timestamptz,
  next_attempt_at timestamptz,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_by_account ON webhook_deliveries (account_id, created_at DESC, id DESC);

CREATE TABLE webhook_attempts (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id  text NOT NULL REFERENCES webhook_deliveries (id),
  attempted_at timestamptz NOT NULL,
  status_code  integer,
  error        text,
  duration_ms  integer NOT NULL
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id);

-- What every task read sees: the task and its webhook's progress.
CREATE VIEW tasks_with_webhook AS
  SELECT t.*, d.status AS webhook_status, d.attempts AS webhook_attempts, d.last_attempt_at AS webhook_last_attempt_at
  FROM tasks t LEFT JOIN webhook_deliveries d ON d.task_id = t.id;

-- Every status change is announced at commit to the processes listening
-- (long polls on API processes, cancels reaching the worker rendering the task).
CREATE FUNCTION notify_task_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('vidgen_task_status', NEW.id || ' ' || NEW.status);
  RETURN NULL;
END $$;
CREATE TRIGGER tasks_status_changed AFTER UPDATE OF status ON tasks
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION notify_task_status();
