-- A durable job's trace context (docs/design.md §4.21): the W3C traceparent
-- of the span it was enqueued in, NULL when none, so that a job pushed to
-- Redis again after Redis lost it still runs in a child span of its
-- enqueue's. A nullable column added at the end: in place, without a copy
-- of the table, while workers of the previous release keep writing.
ALTER TABLE `{{prefix}}ledger`
  ADD COLUMN `trace` VARCHAR(64) NULL,
  ALGORITHM=INPLACE, LOCK=NONE;
