-- Usage totals in shards. Every submission and every ending of an account's tasks added to the same
-- hour's and day's row for the model, so those rows were locked by one transaction at a time until it
-- committed: with many tasks in flight, transactions queued on them (bench:pipeline, issue 20). A
-- transaction now adds to one of 16 rows of its hour and day, picked at random; every reader sums the
-- shards (the totals are sums already). The rows there were become shard 0.
ALTER TABLE usage_hourly ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly DROP CONSTRAINT usage_hourly_pkey;
ALTER TABLE usage_hourly ADD PRIMARY KEY (account_id, hour_start, model, shard);
ALTER TABLE usage_daily ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily ADD PRIMARY KEY (account_id, day_start, model, shard);

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
