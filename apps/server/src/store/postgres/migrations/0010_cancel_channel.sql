-- A task's cancel is also announced on a channel of its own (issue 20). A process that answers no long polls (a
-- `worker`) needs to hear of a status move only when it is a cancel, to stop the render; on `vidgen_task_status` it
-- was sent every move of every task (two or three a task, each delivered to every listening process and parsed there
-- for nothing). Such a process now listens on `vidgen_task_cancelled` (payload: the task's id) instead. Every move is
-- still announced on `vidgen_task_status`, which `api` and `all` processes, and the previous release's, listen on.
CREATE OR REPLACE FUNCTION notify_task_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('vidgen_task_status', NEW.id || ' ' || NEW.status);
  IF NEW.status = 'cancelled' THEN
    PERFORM pg_notify('vidgen_task_cancelled', NEW.id);
  END IF;
  RETURN NULL;
END $$;
