-- The account holder's API: each ledger entry keeps the balance it left, and usage is kept as running
-- totals per account, hour (UTC) and model, updated in the transactions that charge, refund and end
-- tasks: a usage query reads at most 24 rows per model and day, however many tasks there were.

ALTER TABLE ledger_entries ADD COLUMN balance_after bigint;
UPDATE ledger_entries SET balance_after = running.balance
FROM (SELECT id, sum(amount) OVER (PARTITION BY account_id ORDER BY id) AS balance FROM ledger_entries) AS running
WHERE running.id = ledger_entries.id;

CREATE TABLE usage_hourly (
  account_id        text NOT NULL REFERENCES accounts (id),
  hour_start        timestamptz NOT NULL,
  model             text NOT NULL,
  -- Charges made in the hour (acceptances) and refunds made in it (failures, cancels).
  credits_charged   bigint NOT NULL DEFAULT 0,
  credits_refunded  bigint NOT NULL DEFAULT 0,
  -- Tasks that ended in the hour, by final status, and the video seconds of those that succeeded.
  succeeded         integer NOT NULL DEFAULT 0,
  failed            integer NOT NULL DEFAULT 0,
  cancelled         integer NOT NULL DEFAULT 0,
  seconds_delivered bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, hour_start, model)
);

-- What happened before this migration, from the ledger and the tasks.
INSERT INTO usage_hourly (account_id, hour_start, model, credits_charged, credits_refunded)
  SELECT l.account_id, date_trunc('hour', l.created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', t.model,
         sum(CASE WHEN l.kind = 'charge' THEN -l.amount ELSE 0 END), sum(CASE WHEN l.kind = 'refund' THEN l.amount ELSE 0 END)
  FROM ledger_entries l JOIN tasks t ON t.id = l.task_id
  WHERE l.kind IN ('charge', 'refund')
  GROUP BY 1, 2, 3;
INSERT INTO usage_hourly (account_id, hour_start, model, succeeded, failed, cancelled, seconds_delivered)
  SELECT account_id, date_trunc('hour', completed_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', model,
         count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'cancelled'),
         coalesce(sum(duration) FILTER (WHERE status = 'succeeded'), 0)
  FROM tasks WHERE completed_at IS NOT NULL AND status IN ('succeeded', 'failed', 'cancelled')
  GROUP BY 1, 2, 3
  ON CONFLICT (account_id, hour_start, model) DO UPDATE SET
    succeeded = excluded.succeeded, failed = excluded.failed, cancelled = excluded.cancelled, seconds_delivered = excluded.seconds_delivered;
