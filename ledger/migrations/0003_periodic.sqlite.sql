-- Periodic schedules: the last tick each schedule enqueued on a durable
-- topic (docs/design.md §4.15).
CREATE TABLE IF NOT EXISTS `{{prefix}}periodic` (`name` varchar(64),`topic` varchar(64) NOT NULL,`last_tick` bigint NOT NULL,`updated_at` bigint NOT NULL,PRIMARY KEY (`name`));
