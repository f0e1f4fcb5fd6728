-- Usage totals in shards. Every submission and every ending of an account's tasks added to the same
-- hour's and day's row for the model, so those rows were locked by one transaction at a time until it
-- committed: with many tasks in flight, transactions queued on them (bench:pipeline, issue 20). A
-- transaction now adds to one of 16 rows of its hour and day, picked at random, in these tables; every
-- reader sums them together with usage_hourly and usage_daily, which keep what was counted before and
-- what processes of the previous release count while a deploy replaces them (migrations only add).
CREATE TABLE usage_hourly_shards (
  account_id        text NOT NULL REFERENCES accounts (id),
  hour_start        timestamptz NOT NULL,
  model             text NOT NULL,
  shard             smallint NOT NULL,
  credits_charged   bigint NOT NULL DEFAULT 0,
  credits_refunded  bigint NOT NULL DEFAULT 0,
  succeeded         integer NOT NULL DEFAULT 0,
  failed            integer NOT NULL DEFAULT 0,
  cancelled         integer NOT NULL DEFAULT 0,
  seconds_delivered bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, hour_start, model, shard)
);
CREATE TABLE usage_daily_shards (
  account_id        text NOT NULL REFERENCES accounts (id),
  day_start         timestamptz NOT NULL,
  model             text NOT NULL,
  shard             smallint NOT NULL,
  credits_charged   bigint NOT NULL DEFAULT 0,
  credits_refunded  bigint NOT NULL DEFAULT 0,
  succeeded         integer NOT NULL DEFAULT 0,
  failed            integer NOT NULL DEFAULT 0,
  cancelled         integer NOT NULL DEFAULT 0,
  seconds_delivered bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, day_start, model, shard)
);

-- Fails the statement (and so its transaction) with SQLSTATE VG001 and `reason` as the message when
-- `ok` is not true: lets a transaction's last checks and its COMMIT go to the server in one message,
-- so the rows the checks lock are not held while the client answers.
CREATE FUNCTION vidgen_require(ok boolean, reason text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION USING ERRCODE = 'VG001', MESSAGE = reason;
  END IF;
  RETURN true;
END $$;
