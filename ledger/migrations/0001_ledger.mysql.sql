-- The in-flight ledger and the dead-letter archive, as the first release
-- created them. {{prefix}} is the ledger's table prefix (dq_ by default).
CREATE TABLE IF NOT EXISTS `{{prefix}}ledger` (
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
  UNIQUE KEY `idx_{{prefix}}ledger_topic_job` (`topic`, `job_id`),
  KEY `idx_{{prefix}}ledger_lease_until` (`lease_until`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `{{prefix}}dead_letter` (
  `id`         BIGINT       NOT NULL AUTO_INCREMENT,
  `topic`      VARCHAR(64)  NOT NULL,
  `job_id`     VARCHAR(200) NOT NULL,
  `payload`    LONGBLOB     NOT NULL,
  `attempts`   INT          NOT NULL,
  `last_error` TEXT         NOT NULL,
  `died_at`    BIGINT       NOT NULL,
  PRIMARY KEY (`id`),
  KEY `idx_{{prefix}}dead_letter_topic_died` (`topic`, `died_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
