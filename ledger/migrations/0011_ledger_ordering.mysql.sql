-- A job's ordering key (docs/design.md §4.24), NULL for none, so that a job
-- pushed to Redis again after Redis lost it goes back into its key's order,
-- and a worker's record can ask whether another job of the key is in flight
-- or retrying (the index). A column and an index added in place, without a
-- copy of the table, while workers of the previous release keep writing.
ALTER TABLE `{{prefix}}ledger`
  ADD COLUMN `ordering_key` VARCHAR(200) NULL,
  ADD INDEX `idx_{{prefix}}ledger_topic_ordering` (`topic`, `ordering_key`),
  ALGORITHM=INPLACE, LOCK=NONE;
