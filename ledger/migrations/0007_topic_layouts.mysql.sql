-- A topic's partition layouts (docs/design.md §7.1): the partition counts
-- that may still hold its jobs, ascending and comma-separated ("1,4,8"), ""
-- for a topic never partitioned. Kept here so that a Redis data loss
-- cannot take a topic's partition count: the relay and the recoverer write
-- the layout key again from it. A column added with a default: in place,
-- while workers of the previous release keep writing.
ALTER TABLE `{{prefix}}topic_state`
  ADD COLUMN `layouts` VARCHAR(1024) NOT NULL DEFAULT '',
  ALGORITHM=INPLACE, LOCK=NONE;
