-- Usage by UTC day as well, kept in the same transactions as usage_hourly: a daily report of 90 days
-- reads 90 rows per model instead of summing 2,160 hours each (SQLite spent ~7 ms summing 6,480 rows).
CREATE TABLE usage_daily (
  account_id        TEXT NOT NULL REFERENCES accounts (id),
  day_start         INTEGER NOT NULL,
  model             TEXT NOT NULL,
  credits_charged   INTEGER NOT NULL DEFAULT 0,
  credits_refunded  INTEGER NOT NULL DEFAULT 0,
  succeeded         INTEGER NOT NULL DEFAULT 0,
  failed            INTEGER NOT NULL DEFAULT 0,
  cancelled         INTEGER NOT NULL DEFAULT 0,
  seconds_delivered INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, day_start, model)
) STRICT, WITHOUT ROWID;

INSERT INTO usage_daily (account_id, day_start, model, credits_charged, credits_refunded, succeeded, failed, cancelled, seconds_delivered)
  SELECT account_id, (hour_start / 86400000) * 86400000, model, sum(credits_charged), sum(credits_refunded), sum(succeeded), sum(failed),
         sum(cancelled), sum(seconds_delivered)
  FROM usage_hourly GROUP BY 1, 2, 3;
