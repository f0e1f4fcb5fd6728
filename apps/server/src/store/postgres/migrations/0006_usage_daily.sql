-- Usage by UTC day as well, kept in the same transactions as usage_hourly: a daily report of 90 days
-- reads 90 rows per model instead of summing 2,160 hours each.
CREATE TABLE usage_daily (
  account_id        text NOT NULL REFERENCES accounts (id),
  day_start         timestamptz NOT NULL,
  model             text NOT NULL,
  credits_charged   bigint NOT NULL DEFAULT 0,
  credits_refunded  bigint NOT NULL DEFAULT 0,
  succeeded         integer NOT NULL DEFAULT 0,
  failed            integer NOT NULL DEFAULT 0,
  cancelled         integer NOT NULL DEFAULT 0,
  seconds_delivered bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, day_start, model)
);

INSERT INTO usage_daily (account_id, day_start, model, credits_charged, credits_refunded, succeeded, failed, cancelled, seconds_delivered)
  SELECT account_id, date_trunc('day', hour_start AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', model, sum(credits_charged), sum(credits_refunded),
         sum(succeeded), sum(failed), sum(cancelled), sum(seconds_delivered)
  FROM usage_hourly GROUP BY 1, 2, 3;
