-- Job history (docs/design.md §4.18): the first claim's time kept on the
-- ledger row, and one history row per finished job.
ALTER TABLE `{{prefix}}ledger` ADD COLUMN `first_claimed_at` bigint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS `{{prefix}}history` (`id` integer PRIMARY KEY AUTOINCREMENT,`topic` varchar(64) NOT NULL,`job_id` varchar(200) NOT NULL,`outcome` varchar(16) NOT NULL,`attempts` integer NOT NULL,`max_attempts` integer NOT NULL,`enqueued_at` bigint NOT NULL,`due_at` bigint NOT NULL,`first_claimed_at` bigint NOT NULL,`claimed_at` bigint NOT NULL,`finished_at` bigint NOT NULL,`worker` varchar(255) NOT NULL,`last_error` text NOT NULL);
CREATE INDEX IF NOT EXISTS `idx_{{prefix}}history_topic_job` ON `{{prefix}}history`(`topic`,`job_id`);
CREATE INDEX IF NOT EXISTS `idx_{{prefix}}history_topic_finished` ON `{{prefix}}history`(`topic`,`finished_at`);
