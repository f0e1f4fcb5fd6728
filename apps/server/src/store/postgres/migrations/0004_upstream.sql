-- Upstream tasks (a task routed to the remote provider: BytePlus/Volcengine channels). Each is a row
-- before anything depends on it: written `creating` with its channel before the create is sent (the
-- channel's slot is taken), given the upstream id the moment the create answers (`following`),
-- `downloading` once the upstream succeeded, then `ended` with how it ended (`outcome`).
-- The same tables as SQLite's migration 0007.
CREATE TABLE upstream_tasks (
  task_id           text PRIMARY KEY REFERENCES tasks (id),
  channel           text NOT NULL,
  state             text NOT NULL CHECK (state IN ('creating', 'following', 'downloading', 'ended')),
  upstream_id       text,
  -- The upstream's status as last seen: queued, running, succeeded, failed, cancelled, expired.
  upstream_status   text,
  -- When ended: succeeded, failed, expired, cancelled (upstream, before it ran), discarded (finished
  -- upstream after our task had ended: paid for, thrown away), refused (the create was refused),
  -- lost (the create's answer never came: it may exist upstream, it is not sent again).
  outcome           text,
  video_url         text,
  completion_tokens bigint,
  total_tokens      bigint,
  -- following: when to query it next; downloading: when to download (again).
  next_check_at     timestamptz,
  lease_until       timestamptz,
  leased_by         text,
  download_attempts integer NOT NULL DEFAULT 0,
  last_error        text,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  ended_at          timestamptz
);
-- Admission counts each channel's tasks queued or running upstream (creating or following).
CREATE INDEX upstream_tasks_in_flight ON upstream_tasks (channel) WHERE state IN ('creating', 'following');
-- The follower claims what is due.
CREATE INDEX upstream_tasks_due ON upstream_tasks (state, next_check_at) WHERE state IN ('following', 'downloading');

-- Each channel's health, shared by every process: failures in a row put it in a cool-down.
-- The counters are kept in the transactions that end upstream tasks, so metrics read one row per channel.
-- A reservation locks its channel's row (SELECT … FOR UPDATE) before counting what is in flight on it:
-- concurrent reservations on one channel pass one at a time and never overfill it.
CREATE TABLE upstream_channels (
  name                 text PRIMARY KEY,
  consecutive_failures integer NOT NULL DEFAULT 0,
  cooldown_until       timestamptz,
  last_error           text,
  last_error_at        timestamptz,
  creates              integer NOT NULL DEFAULT 0,
  create_failures      integer NOT NULL DEFAULT 0,
  lost_creates         integer NOT NULL DEFAULT 0,
  discarded_results    integer NOT NULL DEFAULT 0
);
