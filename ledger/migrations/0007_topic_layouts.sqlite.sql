-- A topic's partition layouts (docs/design.md §7.1), '' when never
-- partitioned. The default is written "" as gorm's SQLite migrator writes
-- it, so that the models and the migrations compare equal
-- (TestModelsMatchMigrations).
ALTER TABLE `{{prefix}}topic_state` ADD COLUMN `layouts` varchar(1024) NOT NULL DEFAULT "";
