-- Tables of the operator controls (issue 17), for deployments created from an
-- earlier deployments/mysql/schema.sql that apply the schema by hand.
-- `delayq migrate` (ledger's Migrate) creates them by itself. Apply once,
-- before starting a delayq that has them; it only creates tables, so running
-- it again, or on a schema that has them, changes nothing:
--
--   mysql -h HOST -u USER -p DATABASE < deployments/mysql/upgrade-operator.sql
--
-- With a table prefix other than dq_, replace dq_ in the table names.

-- Pause / resume a topic (docs/design.md §4.13).
CREATE TABLE IF NOT EXISTS `dq_topic_state` (
  `topic`      VARCHAR(64)  NOT NULL,
  `paused`     TINYINT(1)   NOT NULL,
  `changed_at` BIGINT       NOT NULL,
  `changed_by` VARCHAR(191) NOT NULL,
  PRIMARY KEY (`topic`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Periodic schedules: the last tick each schedule enqueued on a durable
-- topic (docs/design.md §4.15).
CREATE TABLE IF NOT EXISTS `dq_periodic` (
  `name`       VARCHAR(64) NOT NULL,
  `topic`      VARCHAR(64) NOT NULL,
  `last_tick`  BIGINT      NOT NULL,
  `updated_at` BIGINT      NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
