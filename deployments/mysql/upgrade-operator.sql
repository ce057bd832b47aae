-- delayq upgrade for the operator controls (issue 17): the tables they add
-- to a ledger database created before them. Safe to run more than once.
-- Apply with:
--
--   mysql -h HOST -u USER -p DATABASE < deployments/mysql/upgrade-operator.sql
--
-- Use your table prefix if it is not the default dq_. `delayq migrate` (or
-- sql.auto_migrate) creates the same tables.

-- Periodic schedules: the last tick each schedule enqueued on a durable
-- topic (as in schema.sql).
CREATE TABLE IF NOT EXISTS `dq_periodic` (
  `name`       VARCHAR(64) NOT NULL,
  `topic`      VARCHAR(64) NOT NULL,
  `last_tick`  BIGINT      NOT NULL,
  `updated_at` BIGINT      NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
