-- Upstream tasks (a task routed to the remote provider: BytePlus/Volcengine channels). Each is a row
-- before anything depends on it: written `creating` with its channel before the create is sent (the
-- channel's slot is taken), given the upstream id the moment the create answers (`following`),
-- `downloading` once the upstream succeeded, then `ended` with how it ended (`outcome`).
CREATE TABLE upstream_tasks (
  task_id           TEXT PRIMARY KEY REFERENCES tasks (id),
  channel           TEXT NOT NULL,
  state             TEXT NOT NULL CHECK (state IN ('creating', 'following', 'downloading', 'ended')),
  upstream_id       TEXT,
  -- The upstream's status as last seen: queued, running, succeeded, failed, cancelled, expired.
  upstream_status   TEXT,
  -- When ended: succeeded, failed, expired, cancelled (upstream, before it ran), discarded (finished
  -- upstream after our task had ended: paid for, thrown away), refused (the create was refused),
  -- lost (the create's answer never came: it may exist upstream, it is not sent again).
  outcome           TEXT,
  video_url         TEXT,
  completion_tokens INTEGER,
  total_tokens      INTEGER,
  -- following: when to query it next; downloading: when to download (again).
  next_check_at     INTEGER,
  lease_until       INTEGER,
  leased_by         TEXT,
  download_attempts INTEGER NOT NULL DEFAULT 0,
  last_error        TEXT,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  ended_at          INTEGER
) STRICT;
-- Admission counts each channel's tasks queued or running upstream (creating or following).
CREATE INDEX upstream_tasks_in_flight ON upstream_tasks (channel) WHERE state IN ('creating', 'following');
-- The follower claims what is due.
CREATE INDEX upstream_tasks_due ON upstream_tasks (state, next_check_at) WHERE state IN ('following', 'downloading');

-- Each channel's health, shared by every process: failures in a row put it in a cool-down.
-- The counters are kept in the transactions that end upstream tasks, so metrics read one row per channel.
CREATE TABLE upstream_channels (
  name                 TEXT PRIMARY KEY,
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  cooldown_until       INTEGER,
  last_error           TEXT,
  last_error_at        INTEGER,
  creates              INTEGER NOT NULL DEFAULT 0,
  create_failures      INTEGER NOT NULL DEFAULT 0,
  lost_creates         INTEGER NOT NULL DEFAULT 0,
  discarded_results    INTEGER NOT NULL DEFAULT 0
) STRICT;
