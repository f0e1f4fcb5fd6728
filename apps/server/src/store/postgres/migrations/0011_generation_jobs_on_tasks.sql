-- A task's generation job is its own row's (issue 20, src/queue/pg-generation-lane.ts): workers claim the due tasks of
-- their lane from this table with a lease, where each task had a pg-boss job beside it (a second row inserted, moved
-- to active and completed for every task: the largest single cost left on the PostgreSQL pipeline once the webhook
-- deliveries had become their own queue entries, migration 0009). The columns:
-- - job_lane: the provider lane that runs it (a model's routing when it was submitted).
-- - job_state: 'waiting' (to be run, or running under a lease), 'done', 'dead' (buried); NULL for a task whose job is
--   pg-boss's (a previous release's, until it has run).
-- - job_run_at: when it may next be claimed; job_lease_until: the claim's lease (the app's clock), NULL when no claim
--   holds it; job_lease_id: the claim that holds it, counted up by every claim, so that a run whose lease ran out
--   and another claim took it settles nothing; job_claims: its claims so far (attempts; a release not counted);
--   job_max_attempts: the attempts allowed.
-- A task's move to a terminal status ends its job with it: the claims' index holds only active tasks.
ALTER TABLE tasks ADD COLUMN job_lane text;
ALTER TABLE tasks ADD COLUMN job_state text;
ALTER TABLE tasks ADD COLUMN job_run_at timestamptz;
ALTER TABLE tasks ADD COLUMN job_lease_until timestamptz;
ALTER TABLE tasks ADD COLUMN job_lease_id integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN job_claims integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN job_max_attempts integer;
-- What a claim reads: the active tasks whose job waits, by lane and due time.
CREATE INDEX tasks_jobs_due ON tasks (job_lane, job_run_at) WHERE job_state = 'waiting' AND status IN ('queued', 'processing');
-- Room on each page for a claim's and a lease's new row versions beside the old (HOT updates: no index touched).
ALTER TABLE tasks SET (fillfactor = 80);

-- The previous release's generation jobs that have not ended become their tasks' (pg-boss's schema is absent on a
-- database that never ran it): waiting ones due as they were, running ones leased until pg-boss's lease of them
-- ends, each with the attempts it had. A running one's pg-boss job is cancelled with the rest: the previous release's
-- worker rendering it finds its lease lost at its next heartbeat and stops, and a worker of this release claims the
-- task once the lease has run out. Jobs the previous release still enqueues during a deploy are fetched by this
-- release's workers too (PgBossQueue.claim), at most once a second a lane.
DO $$
BEGIN
  IF to_regclass('pgboss.job') IS NOT NULL THEN
    WITH open AS (
      SELECT name, id, data, start_after, started_on, expire_in, retry_count, state FROM pgboss.job
      WHERE name IN ('vidgen-local', 'vidgen-instant', 'vidgen-byteplus') AND state IN ('created', 'retry', 'active')
      FOR UPDATE),
    moved AS (
      UPDATE tasks t SET job_lane = substr(o.name, length('vidgen-') + 1), job_state = 'waiting', job_run_at = o.start_after,
                         job_lease_until = CASE WHEN o.state = 'active' THEN o.started_on + o.expire_in END,
                         job_claims = greatest((o.data->>'attempt')::int - 1 + o.retry_count + CASE WHEN o.started_on IS NULL THEN 0 ELSE 1 END, 0),
                         job_max_attempts = (o.data->>'maxAttempts')::int
      FROM open o WHERE t.id = o.data->>'taskId' AND t.status IN ('queued', 'processing') AND (o.data->>'kind') = 'generate'
      RETURNING t.id)
    -- (moved runs whether read or not, as every data-modifying WITH does.)
    UPDATE pgboss.job j SET state = 'cancelled', completed_on = now(), output = '{"movedTo":"tasks"}'::jsonb
    FROM open o WHERE j.name = o.name AND j.id = o.id;
  END IF;
END
$$;
