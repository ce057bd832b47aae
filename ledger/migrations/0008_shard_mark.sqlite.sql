-- The ledger shard this database is (docs/design.md §7.1, "Ledger shards"):
-- its place in the shard list, how many there are and the home shard's
-- mark, checked by every process at start. One row (id 1).
CREATE TABLE IF NOT EXISTS `{{prefix}}shard_mark` (`id` integer,`shard` integer NOT NULL,`shards` integer NOT NULL,`home` varchar(32) NOT NULL,`set_at` bigint NOT NULL,PRIMARY KEY (`id`));
