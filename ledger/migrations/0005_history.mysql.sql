-- Job history (docs/design.md §4.18): the first claim's time kept on the
-- ledger row (claimed_at is each claim's), and one history row per finished
-- job, written in the transaction that deletes its ledger row. The ALTER
-- runs in place, so workers of the previous release may keep running.
ALTER TABLE `{{prefix}}ledger`
  ADD COLUMN `first_claimed_at` BIGINT NOT NULL DEFAULT 0,
  ALGORITHM=INPLACE, LOCK=NONE;

CREATE TABLE IF NOT EXISTS `{{prefix}}history` (
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
  PRIMARY KEY (`id`),
  KEY `idx_{{prefix}}history_topic_job` (`topic`, `job_id`),
  KEY `idx_{{prefix}}history_topic_finished` (`topic`, `finished_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
