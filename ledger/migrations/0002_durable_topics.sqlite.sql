-- Durable topics: a job's enqueue time (0 on rows older than the column)
-- and the (state, run_at) index the relay scans.
ALTER TABLE `{{prefix}}ledger` ADD COLUMN `enqueued_at` bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS `idx_{{prefix}}ledger_state_run_at` ON `{{prefix}}ledger`(`state`,`run_at`);
