-- A job's priority within its topic (docs/design.md §4.23), 0 by default.
ALTER TABLE `{{prefix}}ledger` ADD COLUMN `priority` tinyint NOT NULL DEFAULT 0;
