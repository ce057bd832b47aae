-- delayq SQL ledger schema for MySQL 5.7+/8.x and MariaDB 10.3+.
--
-- The tables the ledger's numbered migrations (ledger/migrations, applied by
-- `delayq migrate`) create with the default table prefix "dq_", and the
-- version table that records them as applied. ledger's
-- TestSchemaSQLMatchesMigrations keeps the two in agreement (columns, types,
-- nullability, collation, indexes, recorded versions): `delayq migrate` over
-- tables created here changes nothing. Apply with:
--
--   mysql -h HOST -u USER -p DATABASE < deployments/mysql/schema.sql
--
-- A database made from an earlier release's schema.sql is upgraded by
-- `delayq migrate`, keeping its rows (this file applied over it only creates
-- the missing tables and records what it has; migrate does the rest); `delayq migrate --print` prints the
-- statements instead, for a deployment that applies schema changes by hand.
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

-- Schema versions: one row per migration applied (ledger/migrations);
-- `delayq migrate --status` reads it. The rows this file records come after
-- the ledger's tables below.
CREATE TABLE IF NOT EXISTS `dq_schema_migrations` (
  `version`    INT         NOT NULL,
  `name`       VARCHAR(64) NOT NULL,
  `how`        VARCHAR(16) NOT NULL,
  `applied_at` BIGINT      NOT NULL,
  PRIMARY KEY (`version`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;


-- In-flight ledger: one row per job some worker claimed and that has not
-- finished for good, and, for durable topics, per job waiting for its first
-- run (state 'scheduled', from its enqueue on). Deleted on success; moved to
-- dq_dead_letter when the job dies. The recoverer scans lease_until for stale
-- rows; the relay scans (state, run_at) for scheduled rows falling due.
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
  `enqueued_at`  BIGINT       NOT NULL DEFAULT 0,
  `first_claimed_at` BIGINT   NOT NULL DEFAULT 0,
  `trace`        VARCHAR(64)  NULL,
  `priority`     TINYINT      NOT NULL DEFAULT 0,
  `ordering_key` VARCHAR(200) NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `idx_dq_ledger_topic_job` (`topic`, `job_id`),
  KEY `idx_dq_ledger_state_run_at` (`state`, `run_at`),
  KEY `idx_dq_ledger_lease_until` (`lease_until`),
  KEY `idx_dq_ledger_topic_ordering` (`topic`, `ordering_key`)
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

-- Topic state: the operators' pauses (delayq pause / resume) and partition
-- counts (delayq partitions), one row per topic ever paused or
-- partitioned. It is operator intent, kept here so that no Redis data loss
-- can lift a pause or lose a partition count: the relay and the recoverer
-- write a paused topic's Redis key and a partitioned topic's layout key
-- again from it (docs/design.md §4.13, §7.1). changed_at is the SQL
-- server's clock and grows with each change of a topic's pause (0 on a row
-- written for its layouts only). layouts: the partition counts that may
-- hold jobs, ascending, comma-separated ("" when never partitioned).
CREATE TABLE IF NOT EXISTS `dq_topic_state` (
  `topic`      VARCHAR(64)   NOT NULL,
  `paused`     TINYINT(1)    NOT NULL,
  `changed_at` BIGINT        NOT NULL,
  `changed_by` VARCHAR(191)  NOT NULL,
  `layouts`    VARCHAR(1024) NOT NULL DEFAULT '',
  PRIMARY KEY (`topic`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The ledger shard this database is (docs/design.md §7.1, "Ledger shards"):
-- its place in sql.shards, how many shards there are and the home shard's
-- mark, written by the first process that starts on it and checked by every
-- later one. One row (id 1).
CREATE TABLE IF NOT EXISTS `dq_shard_mark` (
  `id`     TINYINT     NOT NULL,
  `shard`  INT         NOT NULL,
  `shards` INT         NOT NULL,
  `home`   VARCHAR(32) NOT NULL,
  `set_at` BIGINT      NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Job history: one row per finished job (succeeded, dead, cancelled,
-- purged), written in the transaction that deletes its dq_ledger row; kept
-- for the history retention (history.retention), then deleted in batches.
CREATE TABLE IF NOT EXISTS `dq_history` (
  `id`               BIGINT       NOT NULL AUTO_INCREMENT,
  `topic`            VARCHAR(64)  NOT NULL,
  `job_id`           VARCHAR(200) NOT NULL,
  `outcome`          VARCHAR(16)  NOT NULL,
  `attempts`         INT          NOT NULL,
  `max_attempts`     INT          NOT NULL,
  `enqueued_at`      BIGINT       NOT NULL,
  `due_at`           BIGINT       NOT NULL,
  `first_claimed_at` BIGINT       NOT NULL,
  `claimed_at`       BIGINT       NOT NULL,
  `finished_at`      BIGINT       NOT NULL,
  `worker`           VARCHAR(255) NOT NULL,
  `last_error`       TEXT         NOT NULL,
  `result`           TEXT         NULL,
  PRIMARY KEY (`id`),
  KEY `idx_dq_history_topic_job` (`topic`, `job_id`),
  KEY `idx_dq_history_topic_finished` (`topic`, `finished_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Periodic schedules (package queue/periodic): the last tick each schedule
-- enqueued on a durable topic. A tick is claimed by a conditional update
-- (last_tick < tick) in the transaction that enqueues its job, so it is
-- enqueued once across every process. Redis topics keep the same in Redis.
CREATE TABLE IF NOT EXISTS `dq_periodic` (
  `name`       VARCHAR(64) NOT NULL,
  `topic`      VARCHAR(64) NOT NULL,
  `last_tick`  BIGINT      NOT NULL,
  `updated_at` BIGINT      NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The migrations these tables hold, recorded as applied by this file. Each
-- is recorded only if its tables and columns are there, so that the file
-- applied over an earlier release's tables (it creates only the missing
-- ones) records only what they have: `delayq migrate` then applies the rest.
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 1, 'ledger', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_ledger') AND EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_dead_letter');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 2, 'durable_topics', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_ledger' AND COLUMN_NAME = 'enqueued_at')
    AND EXISTS (SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_ledger' AND INDEX_NAME = 'idx_dq_ledger_state_run_at');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 3, 'periodic', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL WHERE EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_periodic');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 4, 'topic_state', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL WHERE EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_topic_state');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 5, 'history', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_ledger' AND COLUMN_NAME = 'first_claimed_at')
    AND EXISTS (SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_history' AND INDEX_NAME = 'idx_dq_history_topic_finished');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 6, 'history_result', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_history' AND COLUMN_NAME = 'result');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 7, 'topic_layouts', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_topic_state' AND COLUMN_NAME = 'layouts');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 8, 'shard_mark', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL WHERE EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_shard_mark');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 9, 'ledger_trace', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_ledger' AND COLUMN_NAME = 'trace');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 10, 'ledger_priority', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_ledger' AND COLUMN_NAME = 'priority');
INSERT IGNORE INTO `dq_schema_migrations` (`version`, `name`, `how`, `applied_at`)
  SELECT 11, 'ledger_ordering', 'schema.sql', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 FROM DUAL
  WHERE EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dq_ledger' AND COLUMN_NAME = 'ordering_key');

-- ---------------------------------------------------------------------------
-- Order auto-close, the reference job (package jobs/orderclose).
--
-- The same tables as `orderclose.Migrate` (gorm AutoMigrate) creates;
-- orderclose's TestSchemaSQLMatchesMigrate keeps the two in agreement. They
-- must live in the ledger's database: the close handler's business writes and
-- the deletion of its ledger row commit in one transaction. Times are Unix
-- milliseconds; money is integer cents.

-- Stock-keeping units: what new orders may take. The CHECK (MySQL 8.0.16+,
-- MariaDB 10.2+) backs the conditional updates that never let stock go
-- negative.
CREATE TABLE IF NOT EXISTS `skus` (
  `id`          BIGINT      NOT NULL AUTO_INCREMENT,
  `sku`         VARCHAR(64) NOT NULL,
  `stock`       BIGINT      NOT NULL,
  `price_cents` BIGINT      NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `idx_skus_sku` (`sku`),
  CONSTRAINT `chk_skus_stock` CHECK (`stock` >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Orders: pending_payment until paid or closed (both moves are conditional
-- updates from pending_payment). The sweeper scans (status, pay_deadline).
-- idempotency_key is the create's Idempotency-Key (NULL without one): its
-- unique key makes a retried create answer with the first order. Tables made
-- before it existed get it from `delayq migrate`, or by hand:
--   ALTER TABLE `orders` ADD COLUMN `idempotency_key` VARCHAR(64) DEFAULT NULL,
--     ADD UNIQUE KEY `idx_orders_idempotency_key` (`idempotency_key`);
-- payment_window_ms is the window the order was created with (an extend
-- moves pay_deadline, not it), which a retried create is compared with;
-- tables made before it get it from `delayq migrate`, or by hand:
--   ALTER TABLE `orders` ADD COLUMN `payment_window_ms` BIGINT NOT NULL DEFAULT 0 AFTER `close_reason`;
CREATE TABLE IF NOT EXISTS `orders` (
  `id`           BIGINT      NOT NULL AUTO_INCREMENT,
  `order_no`     VARCHAR(64) NOT NULL,
  `user_id`      VARCHAR(64) NOT NULL,
  `amount_cents` BIGINT      NOT NULL,
  `status`       VARCHAR(16) NOT NULL,
  `created_at`   BIGINT      NOT NULL,
  `pay_deadline` BIGINT      NOT NULL,
  `paid_at`      BIGINT      DEFAULT NULL,
  `closed_at`    BIGINT      DEFAULT NULL,
  `close_reason` VARCHAR(32) NOT NULL,
  `payment_window_ms` BIGINT NOT NULL DEFAULT 0,
  `version`      INT         NOT NULL,
  `idempotency_key` VARCHAR(64) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `idx_orders_order_no` (`order_no`),
  UNIQUE KEY `idx_orders_idempotency_key` (`idempotency_key`),
  KEY `idx_orders_status_deadline` (`status`, `pay_deadline`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Order lines: the stock each order holds, one row per SKU.
CREATE TABLE IF NOT EXISTS `order_items` (
  `id`       BIGINT      NOT NULL AUTO_INCREMENT,
  `order_no` VARCHAR(64) NOT NULL,
  `sku`      VARCHAR(64) NOT NULL,
  `quantity` BIGINT      NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `idx_order_items_order_sku` (`order_no`, `sku`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Close log: one row per closed order. Its unique key is what makes a second
-- close a no-op (no second stock release).
CREATE TABLE IF NOT EXISTS `order_close_log` (
  `id`          BIGINT      NOT NULL AUTO_INCREMENT,
  `order_no`    VARCHAR(64) NOT NULL,
  `closed_at`   BIGINT      NOT NULL,
  `job_attempt` INT         NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `idx_order_close_log_order_no` (`order_no`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
