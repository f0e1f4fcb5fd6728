-- The account holder's API: each ledger entry keeps the balance it left, and usage is kept as running
-- totals per account, hour (UTC, ms) and model, updated in the transactions that charge, refund and
-- end tasks: a usage query reads at most 24 rows per model and day, however many tasks there were.

ALTER TABLE ledger_entries ADD COLUMN balance_after INTEGER;
UPDATE ledger_entries SET balance_after = running.balance
FROM (SELECT id, sum(amount) OVER (PARTITION BY account_id ORDER BY id) AS balance FROM ledger_entries) AS running
WHERE running.id = ledger_entries.id;

CREATE TABLE usage_hourly (
  account_id        TEXT NOT NULL REFERENCES accounts (id),
  hour_start        INTEGER NOT NULL,
  model             TEXT NOT NULL,
  -- Charges made in the hour (acceptances) and refunds made in it (failures, cancels).
  credits_charged   INTEGER NOT NULL DEFAULT 0,
  credits_refunded  INTEGER NOT NULL DEFAULT 0,
  -- Tasks that ended in the hour, by final status, and the video seconds of those that succeeded.
  succeeded         INTEGER NOT NULL DEFAULT 0,
  failed            INTEGER NOT NULL DEFAULT 0,
  cancelled         INTEGER NOT NULL DEFAULT 0,
  seconds_delivered INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, hour_start, model)
) STRICT;

-- What happened before this migration, from the ledger and the tasks.
INSERT INTO usage_hourly (account_id, hour_start, model, credits_charged, credits_refunded)
  SELECT l.account_id, (l.created_at / 3600000) * 3600000, t.model,
         sum(CASE WHEN l.kind = 'charge' THEN -l.amount ELSE 0 END), sum(CASE WHEN l.kind = 'refund' THEN l.amount ELSE 0 END)
  FROM ledger_entries l JOIN tasks t ON t.id = l.task_id
  WHERE l.kind IN ('charge', 'refund')
  GROUP BY 1, 2, 3;
INSERT INTO usage_hourly (account_id, hour_start, model, succeeded, failed, cancelled, seconds_delivered)
  SELECT account_id, (completed_at / 3600000) * 3600000, model,
         sum(status = 'succeeded'), sum(status = 'failed'), sum(status = 'cancelled'), sum(CASE WHEN status = 'succeeded' THEN duration ELSE 0 END)
  FROM tasks WHERE completed_at IS NOT NULL AND status IN ('succeeded', 'failed', 'cancelled')
  GROUP BY 1, 2, 3
  ON CONFLICT (account_id, hour_start, model) DO UPDATE SET
    succeeded = excluded.succeeded, failed = excluded.failed, cancelled = excluded.cancelled, seconds_delivered = excluded.seconds_delivered;
