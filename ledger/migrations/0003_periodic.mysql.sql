-- Periodic schedules: the last tick each schedule enqueued on a durable
-- topic (docs/design.md §4.15).
CREATE TABLE IF NOT EXISTS `{{prefix}}periodic` (
  `name`       VARCHAR(64) NOT NULL,
  `topic`      VARCHAR(64) NOT NULL,
  `last_tick`  BIGINT      NOT NULL,
  `updated_at` BIGINT      NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
