-- Upgrade of dq_ledger for durable topics, for tables created from an
-- earlier deployments/mysql/schema.sql (before the `enqueued_at` column and
-- the (state, run_at) index). `delayq migrate` (ledger's Migrate) makes the
-- same change by itself; this file is for deployments that apply the schema
-- by hand. Apply once, before starting a delayq that has durable topics:
--
--   mysql -h HOST -u USER -p DATABASE < deployments/mysql/upgrade-durable.sql
--
-- Live rows are kept (their enqueued_at is 0: unknown); workers of the
-- previous version may keep running meanwhile. On MySQL 5.6+ and MariaDB
-- 10.3+ the ALTER runs in place without blocking reads or writes
-- (ALGORITHM=INPLACE, LOCK=NONE). The lease_until index is dropped and
-- created again after the new one only so that the table ends up exactly as
-- schema.sql creates it (index order, as SHOW CREATE TABLE lists it);
-- ledger's TestUpgradeSQLGivesSchemaSQL checks that it does. With a table
-- prefix other than dq_, replace dq_ in the table and index names.
ALTER TABLE `dq_ledger`
  ADD COLUMN `enqueued_at` BIGINT NOT NULL DEFAULT 0,
  DROP KEY `idx_dq_ledger_lease_until`,
  ADD KEY `idx_dq_ledger_state_run_at` (`state`, `run_at`),
  ADD KEY `idx_dq_ledger_lease_until` (`lease_until`),
  ALGORITHM=INPLACE, LOCK=NONE;
