// Package orderclose is delayq's reference job: an order not paid within its
// payment window is closed and its reserved stock released, exactly once in
// effect, whatever fails.
//
// The pieces:
//
//   - Service.CreateOrder takes the stock, inserts the order and its items
//     and enqueues the close job "order_close:<order_no>" on the durable
//     topic "order_close", due at the pay deadline, in one transaction: an
//     order exists exactly when its close job does. The job is pushed to
//     Redis after the commit; with Redis down, the relay pushes it later.
//     NewOrder.IdempotencyKey (the HTTP Idempotency-Key header), stored with
//     the order under a unique key, makes a retried create answer with the
//     first order instead of making another.
//   - Service.Pay moves pending_payment to paid with a conditional update and
//     then cancels the close job, best effort.
//   - The close handler (Register attaches it to a dataplane.Worker) runs under
//     ledger.Transactional: pending_payment to closed, the close-log row and
//     the stock given back commit together with the deletion of the job's
//     ledger row. The conditional update and the unique key of
//     order_close_log make a second run a no-op.
//   - The Sweeper, a cron job that one process at a time runs, re-enqueues
//     the close job of every pending order past its deadline plus a grace
//     period: a belt over the braces (the durable topic and its relay), which
//     should find nothing to do; its metrics say if it ever does.
//   - NewHTTPHandler serves POST /v1/orders, POST /v1/orders/{no}/pay and
//     GET /v1/orders/{no}, for the program to mount (or not).
//
// The orders tables must live in the ledger's database: the close handler's
// business writes and the ledger row's deletion are one transaction. Migrate
// creates them; deployments/mysql/schema.sql holds the same tables (a test
// keeps the two in agreement).
package orderclose
