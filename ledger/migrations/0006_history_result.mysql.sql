-- A job's result in its history row (docs/design.md §4.18): what its
-- handler recorded (queue.RecordResult), JSON of at most 4096 bytes, NULL
-- when none. A column added at the end, nullable: in place, without a copy
-- of the table, while workers of the previous release keep writing.
ALTER TABLE `{{prefix}}history`
  ADD COLUMN `result` TEXT NULL,
  ALGORITHM=INPLACE, LOCK=NONE;
