-- Durable topics: a job's enqueue time and the (state, run_at) index the
-- relay scans for scheduled rows falling due. Live rows are kept (their
-- enqueued_at is 0: unknown), and the ALTER runs in place without blocking
-- reads or writes, so workers of the previous release may keep running.
-- The lease_until index is dropped and added again after the new one only
-- so that the table ends as a fresh one (SHOW CREATE TABLE's index order).
ALTER TABLE `{{prefix}}ledger`
  ADD COLUMN `enqueued_at` BIGINT NOT NULL DEFAULT 0,
  DROP KEY `idx_{{prefix}}ledger_lease_until`,
  ADD KEY `idx_{{prefix}}ledger_state_run_at` (`state`, `run_at`),
  ADD KEY `idx_{{prefix}}ledger_lease_until` (`lease_until`),
  ALGORITHM=INPLACE, LOCK=NONE;
