-- Topic state: the operators' pauses (docs/design.md §4.13).
CREATE TABLE IF NOT EXISTS `{{prefix}}topic_state` (
  `topic`      VARCHAR(64)  NOT NULL,
  `paused`     TINYINT(1)   NOT NULL,
  `changed_at` BIGINT       NOT NULL,
  `changed_by` VARCHAR(191) NOT NULL,
  PRIMARY KEY (`topic`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
