-- The in-flight ledger and the dead-letter archive, as the first release
-- created them on SQLite (gorm's AutoMigrate of the ledger's models then).
-- {{prefix}} is the ledger's table prefix (dq_ by default); index names
-- carry it because SQLite's index names are per database, not per table.
CREATE TABLE IF NOT EXISTS `{{prefix}}ledger` (`id` integer PRIMARY KEY AUTOINCREMENT,`topic` varchar(64) NOT NULL,`job_id` varchar(200) NOT NULL,`payload` longblob NOT NULL,`attempt` integer NOT NULL,`max_attempts` integer NOT NULL,`run_at` bigint NOT NULL,`claimed_at` bigint NOT NULL,`lease_until` bigint NOT NULL,`worker` varchar(255) NOT NULL,`state` varchar(16) NOT NULL,`last_error` text NOT NULL,`updated_at` bigint NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_{{prefix}}ledger_topic_job` ON `{{prefix}}ledger`(`topic`,`job_id`);
CREATE INDEX IF NOT EXISTS `idx_{{prefix}}ledger_lease_until` ON `{{prefix}}ledger`(`lease_until`);

CREATE TABLE IF NOT EXISTS `{{prefix}}dead_letter` (`id` integer PRIMARY KEY AUTOINCREMENT,`topic` varchar(64) NOT NULL,`job_id` varchar(200) NOT NULL,`payload` longblob NOT NULL,`attempts` integer NOT NULL,`last_error` text NOT NULL,`died_at` bigint NOT NULL);
CREATE INDEX IF NOT EXISTS `idx_{{prefix}}dead_letter_topic_died` ON `{{prefix}}dead_letter`(`topic`,`died_at`);
