-- A durable job's trace context (docs/design.md §4.21), NULL when none.
ALTER TABLE `{{prefix}}ledger` ADD COLUMN `trace` varchar(64);
