-- A job's ordering key (docs/design.md §4.24), NULL for none.
ALTER TABLE `{{prefix}}ledger` ADD COLUMN `ordering_key` varchar(200);
CREATE INDEX `idx_{{prefix}}ledger_topic_ordering` ON `{{prefix}}ledger` (`topic`, `ordering_key`);
