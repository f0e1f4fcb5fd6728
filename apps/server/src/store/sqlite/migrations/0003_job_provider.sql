-- Jobs name the provider that will run them, so that a worker claims only
-- jobs of providers with a free slot (renders are CPU-bound, upstream calls are not).
ALTER TABLE jobs ADD COLUMN provider TEXT NOT NULL DEFAULT 'local';
CREATE INDEX jobs_claimable_by_provider ON jobs (provider, state, run_at) WHERE state IN ('available', 'leased');
