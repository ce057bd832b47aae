-- A job's result in its history row (docs/design.md §4.18), NULL when none.
ALTER TABLE `{{prefix}}history` ADD COLUMN `result` text;
