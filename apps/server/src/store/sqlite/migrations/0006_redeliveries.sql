-- Each operator redelivery is counted: an attempt that was under way when one was made records itself,
-- but does not settle the delivery (a 410 or the end of the schedule no longer undoes the redelivery).
ALTER TABLE webhook_deliveries ADD COLUMN redeliveries INTEGER NOT NULL DEFAULT 0;
