-- The ledger shard this database is (docs/design.md §7.1, "Ledger shards"):
-- its place in the shard list, how many shards there are, and the home
-- shard's mark, written by the first process that starts on it and checked
-- by every later one, so that a list given in another order, or with
-- another count, or with a database of another deployment is refused
-- instead of looking for rows on the wrong shards. One row (id 1).
CREATE TABLE IF NOT EXISTS `{{prefix}}shard_mark` (
  `id`     TINYINT     NOT NULL,
  `shard`  INT         NOT NULL,
  `shards` INT         NOT NULL,
  `home`   VARCHAR(32) NOT NULL,
  `set_at` BIGINT      NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
