-- A webhook delivery is its own queue entry (issue 20): workers claim pending deliveries that are due from this
-- table, with a lease, where each used to have a pg-boss job beside it (a second row inserted, moved to active and
-- completed for every task with a webhook: the largest single cost left on the PostgreSQL pipeline). The columns:
-- - lease_id: the claim that holds the delivery, counted up by every claim and by a redelivery; a run whose
--   lease_id is no longer the row's (its lease ran out and another claim took it, or an operator redelivered)
--   completes, retries and extends nothing.
-- - lease_until: the claim's lease (the app's clock, as next_attempt_at); NULL when no claim holds it.
-- - unrecorded_claims: claims since the last attempt recorded; a delivery whose workers keep dying before they
--   record anything fails instead of being claimed for ever.
ALTER TABLE webhook_deliveries ADD COLUMN lease_id integer NOT NULL DEFAULT 0;
ALTER TABLE webhook_deliveries ADD COLUMN lease_until timestamptz;
ALTER TABLE webhook_deliveries ADD COLUMN unrecorded_claims integer NOT NULL DEFAULT 0;
-- What a claim reads: the pending deliveries, by when they are due.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- The previous release's delivery jobs have no work left: the rows are the queue now. (pg-boss's schema is absent on a
-- database that never ran it.) A job a worker of the previous release is running during a deploy finishes its attempt;
-- the delivery may then be attempted again by this release (receivers deduplicate by webhook-id).
DO $$
BEGIN
  IF to_regclass('pgboss.job') IS NOT NULL THEN
    UPDATE pgboss.job SET state = 'cancelled', completed_on = now() WHERE name = 'vidgen-webhooks' AND state IN ('created', 'retry');
  END IF;
END
$$;
