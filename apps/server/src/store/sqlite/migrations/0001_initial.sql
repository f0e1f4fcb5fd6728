-- Accounts, API keys, the credit ledger, tasks and idempotency records.
-- Times are milliseconds since the Unix epoch (UTC).

CREATE TABLE accounts (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL,
  -- Kept equal to the sum of the account's ledger entries, in the same transactions.
  balance        INTEGER NOT NULL CHECK (balance >= 0),
  webhook_secret TEXT NOT NULL,
  created_at     INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
  id         TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts (id),
  hash       TEXT NOT NULL UNIQUE,
  hint       TEXT NOT NULL,
  mode       TEXT NOT NULL CHECK (mode IN ('live', 'test')),
  scopes     TEXT NOT NULL,
  name       TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  revoked_at INTEGER
) STRICT;
CREATE INDEX api_keys_by_account ON api_keys (account_id);

CREATE TABLE tasks (
  id                TEXT PRIMARY KEY,
  account_id        TEXT NOT NULL REFERENCES accounts (id),
  status            TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'succeeded', 'failed', 'cancelled')),
  model             TEXT NOT NULL,
  prompt            TEXT NOT NULL,
  duration          INTEGER NOT NULL,
  aspect_ratio      TEXT NOT NULL,
  resolution        TEXT NOT NULL,
  mode              TEXT NOT NULL,
  media_urls        TEXT NOT NULL,
  metadata          TEXT,
  webhook_url       TEXT,
  credits_charged   INTEGER NOT NULL CHECK (credits_charged >= 0),
  credits_refunded  INTEGER NOT NULL DEFAULT 0 CHECK (credits_refunded >= 0),
  output_url        TEXT,
  output_expires_at INTEGER,
  error_code        TEXT,
  error_message     TEXT,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  completed_at      INTEGER
) STRICT;
-- Listing: newest first per account, optionally by status.
CREATE INDEX tasks_by_account ON tasks (account_id, created_at DESC, id DESC);
CREATE INDEX tasks_by_account_status ON tasks (account_id, status, created_at DESC, id DESC);

CREATE TABLE ledger_entries (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  account_id TEXT NOT NULL REFERENCES accounts (id),
  kind       TEXT NOT NULL CHECK (kind IN ('grant', 'charge', 'refund')),
  amount     INTEGER NOT NULL,
  task_id    TEXT REFERENCES tasks (id),
  note       TEXT,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX ledger_by_account ON ledger_entries (account_id, id);
-- One charge and at most one refund per task, whatever the concurrency.
CREATE UNIQUE INDEX ledger_once_per_task ON ledger_entries (task_id, kind) WHERE task_id IS NOT NULL;

CREATE TABLE idempotency_keys (
  account_id      TEXT NOT NULL REFERENCES accounts (id),
  key             TEXT NOT NULL,
  fingerprint     TEXT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('in_progress', 'done')),
  response_status INTEGER,
  response_body   TEXT,
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL,
  PRIMARY KEY (account_id, key)
) STRICT;
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
