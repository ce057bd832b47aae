-- A job's priority within its topic (docs/design.md §4.23), 0 by default,
-- so that a job pushed to Redis again after Redis lost it goes back at its
-- level. A column with a default added at the end: in place, without a
-- copy of the table, while workers of the previous release keep writing
-- (their rows get the default).
ALTER TABLE `{{prefix}}ledger`
  ADD COLUMN `priority` TINYINT NOT NULL DEFAULT 0,
  ALGORITHM=INPLACE, LOCK=NONE;
