-- Each channel's tasks in flight upstream (creating or following), kept on its row. A reservation used
-- to count them (SELECT count(*) over upstream_tasks) while it held the channel's row, and the
-- submitter's look at the channels' health counted them again: with 10,000 tasks in flight that was
-- half a million index entries read a second, every reservation on a channel waiting for the one
-- before it (bench:upstream, issue 20). The count is now a column, kept by triggers on upstream_tasks
-- in the transactions that move the rows, whichever release's process writes them: a process of the
-- previous release, still counting rows during a deploy, keeps it true as well (migrations only add).
ALTER TABLE upstream_channels ADD COLUMN in_flight integer NOT NULL DEFAULT 0;

CREATE FUNCTION vidgen_upstream_in_flight() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state IN ('creating', 'following') THEN
    UPDATE upstream_channels SET in_flight = in_flight - 1 WHERE name = OLD.channel;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.state IN ('creating', 'following') THEN
    -- A row for the channel if it has none yet (a reservation writes it first; this keeps the count without it).
    INSERT INTO upstream_channels (name, in_flight) VALUES (NEW.channel, 1)
    ON CONFLICT (name) DO UPDATE SET in_flight = upstream_channels.in_flight + 1;
  END IF;
  RETURN NULL;
END
$$;

-- No rows written by another transaction while the triggers are created and the counts taken.
LOCK TABLE upstream_tasks IN SHARE ROW EXCLUSIVE MODE;
CREATE TRIGGER upstream_tasks_in_flight_insert AFTER INSERT ON upstream_tasks
  FOR EACH ROW WHEN (NEW.state IN ('creating', 'following')) EXECUTE FUNCTION vidgen_upstream_in_flight();
CREATE TRIGGER upstream_tasks_in_flight_delete AFTER DELETE ON upstream_tasks
  FOR EACH ROW WHEN (OLD.state IN ('creating', 'following')) EXECUTE FUNCTION vidgen_upstream_in_flight();
-- Only a move into or out of flight, or to another channel: the checks of followed tasks do not fire it.
CREATE TRIGGER upstream_tasks_in_flight_update AFTER UPDATE OF state, channel ON upstream_tasks
  FOR EACH ROW WHEN ((OLD.state IN ('creating', 'following')) IS DISTINCT FROM (NEW.state IN ('creating', 'following'))
                     OR (OLD.channel IS DISTINCT FROM NEW.channel AND NEW.state IN ('creating', 'following')))
  EXECUTE FUNCTION vidgen_upstream_in_flight();

INSERT INTO upstream_channels (name) SELECT DISTINCT channel FROM upstream_tasks ON CONFLICT (name) DO NOTHING;
UPDATE upstream_channels c SET in_flight = (SELECT count(*) FROM upstream_tasks u WHERE u.channel = c.name AND u.state IN ('creating', 'following'));
