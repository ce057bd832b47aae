-- delayq SQL ledger schema for MySQL 5.7+/8.x and MariaDB 10.3+.
--
-- The same tables as `ledger.(*Ledger).Migrate` (gorm AutoMigrate) creates with
-- the default table prefix "dq_"; ledger's TestSchemaSQLMatchesAutoMigrate
-- keeps the two in agreement (columns, types, nullability, collation, indexes).
-- Running Migrate over tables created here changes nothing. Apply with:
--
--   mysql -h HOST -u USER -p DATABASE < deployments/mysql/schema.sql
--
-- Recommended: connect the ledger with READ COMMITTED isolation (DSN parameter
-- transaction_isolation=%27READ-COMMITTED%27 on MySQL 8 / MariaDB 11.1+,
-- tx_isolation=... before). Under the default REPEATABLE READ, concurrent batch
-- DELETEs and INSERTs deadlock on gap locks of the unique key; the ledger
-- retries them, but READ COMMITTED has no such locks and was about a third
-- faster in ledger's BenchmarkRecordComplete with 8 concurrent writers
-- (35k against 26k jobs/s on a 2-CPU MariaDB 10.11 test box).
--
-- Times are Unix milliseconds (BIGINT). Strings are utf8mb4 with the binary
-- collation: job ids are Redis keys and compare byte-wise ("Order:1" and
-- "order:1" are two jobs).

-- In-flight ledger: one row per job some worker claimed and that has not
-- finished for good. Deleted on success; moved to dq_dead_letter when the job
-- dies. The recoverer scans lease_until for stale rows.
CREATE TABLE IF NOT EXISTS `dq_ledger` (
  `id`           BIGINT       NOT NULL AUTO_INCREMENT,
  `topic`        VARCHAR(64)  NOT NULL,
  `job_id`       VARCHAR(200) NOT NULL,
  `payload`      LONGBLOB     NOT NULL,
  `attempt`      INT          NOT NULL,
  `max_attempts` INT          NOT NULL,
  `run_at`       BIGINT       NOT NULL,
  `claimed_at`   BIGINT       NOT NULL,
  `lease_until`  BIGINT       NOT NULL,
  `worker`       VARCHAR(255) NOT NULL,
  `state`        VARCHAR(16)  NOT NULL,
  `last_error`   TEXT         NOT NULL,
  `updated_at`   BIGINT       NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `idx_dq_ledger_topic_job` (`topic`, `job_id`),
  KEY `idx_dq_ledger_lease_until` (`lease_until`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Dead-letter archive: jobs that ran out of attempts or failed permanently,
-- with payload and last error. Listed by topic and day.
CREATE TABLE IF NOT EXISTS `dq_dead_letter` (
  `id`         BIGINT       NOT NULL AUTO_INCREMENT,
  `topic`      VARCHAR(64)  NOT NULL,
  `job_id`     VARCHAR(200) NOT NULL,
  `payload`    LONGBLOB     NOT NULL,
  `attempts`   INT          NOT NULL,
  `last_error` TEXT         NOT NULL,
  `died_at`    BIGINT       NOT NULL,
  PRIMARY KEY (`id`),
  KEY `idx_dq_dead_letter_topic_died` (`topic`, `died_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
