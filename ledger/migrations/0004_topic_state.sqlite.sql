-- Topic state: the operators' pauses (docs/design.md §4.13).
CREATE TABLE IF NOT EXISTS `{{prefix}}topic_state` (`topic` varchar(64),`paused` numeric NOT NULL,`changed_at` bigint NOT NULL,`changed_by` varchar(191) NOT NULL,PRIMARY KEY (`topic`));
