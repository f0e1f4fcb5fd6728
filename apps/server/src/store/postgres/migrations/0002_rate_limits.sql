-- Per-key request counters shared by every API process (D10), one row per key and window.
-- UNLOGGED: counters are worth nothing after a crash, and skipping the WAL keeps a hit cheap.
CREATE UNLOGGED TABLE rate_limit_windows (
  key          text NOT NULL,
  window_start timestamptz NOT NULL,
  count        integer NOT NULL,
  PRIMARY KEY (key, window_start)
);
