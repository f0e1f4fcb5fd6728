-- The generation pipeline: jobs with leases, task deadlines and output files.

ALTER TABLE tasks ADD COLUMN deadline_at INTEGER;
ALTER TABLE tasks ADD COLUMN output_key TEXT;
-- The deadline sweep and the output sweep read these.
CREATE INDEX tasks_active_by_deadline ON tasks (deadline_at) WHERE status IN ('queued', 'processing');
CREATE INDEX tasks_outputs_by_expiry ON tasks (output_expires_at) WHERE output_key IS NOT NULL;

-- A job is one unit of work for a worker (generate a task's video). It is
-- claimed with a lease; a worker that dies loses the lease and the job is
-- claimed again. `attempts` counts claims.
CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id      TEXT NOT NULL UNIQUE REFERENCES tasks (id),
  state        TEXT NOT NULL CHECK (state IN ('available', 'leased', 'done', 'dead')),
  attempts     INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  run_at       INTEGER NOT NULL,
  lease_until  INTEGER,
  leased_by    TEXT,
  last_error   TEXT,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX jobs_claimable ON jobs (state, run_at) WHERE state IN ('available', 'leased');
