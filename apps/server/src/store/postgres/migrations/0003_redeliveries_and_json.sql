-- Each operator redelivery is counted: an attempt that was under way when one was made records itself,
-- but does not settle the delivery (a 410 or the end of the schedule no longer undoes the redelivery).
ALTER TABLE webhook_deliveries ADD COLUMN redeliveries integer NOT NULL DEFAULT 0;

-- A task's metadata and a replayed answer come back as they were sent, key order included (D5):
-- json keeps the text, jsonb reordered the keys. The view over tasks is made again around the change.
DROP VIEW tasks_with_webhook;
ALTER TABLE tasks ALTER COLUMN metadata TYPE json USING metadata::json;
ALTER TABLE idempotency_keys ALTER COLUMN response_body TYPE json USING response_body::json;
CREATE VIEW tasks_with_webhook AS
  SELECT t.*, d.status AS webhook_status, d.attempts AS webhook_attempts, d.last_attempt_at AS webhook_last_attempt_at
  FROM tasks t LEFT JOIN webhook_deliveries d ON d.task_id = t.id;
