CREATE TABLE `dq_dead_letter` (`id` integer PRIMARY KEY AUTOINCREMENT,`topic` varchar(64) NOT NULL,`job_id` varchar(200) NOT NULL,`payload` longblob NOT NULL,`attempts` integer NOT NULL,`last_error` text NOT NULL,`died_at` bigint NOT NULL);
CREATE TABLE `dq_ledger` (`id` integer PRIMARY KEY AUTOINCREMENT,`topic` varchar(64) NOT NULL,`job_id` varchar(200) NOT NULL,`payload` longblob NOT NULL,`attempt` integer NOT NULL,`max_attempts` integer NOT NULL,`run_at` bigint NOT NULL,`claimed_at` bigint NOT NULL,`lease_until` bigint NOT NULL,`worker` varchar(255) NOT NULL,`state` varchar(16) NOT NULL,`last_error` text NOT NULL,`updated_at` bigint NOT NULL,`enqueued_at` bigint NOT NULL DEFAULT 0);
CREATE INDEX `idx_dq_dead_letter_topic_died` ON `dq_dead_letter`(`topic`,`died_at`);
CREATE INDEX `idx_dq_ledger_lease_until` ON `dq_ledger`(`lease_until`);
CREATE INDEX `idx_dq_ledger_state_run_at` ON `dq_ledger`(`state`,`run_at`);
CREATE UNIQUE INDEX `idx_dq_ledger_topic_job` ON `dq_ledger`(`topic`,`job_id`);
