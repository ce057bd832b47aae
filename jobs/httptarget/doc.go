// Package httptarget is the built-in handler of HTTP-target topics: when a
// job of such a topic is due, the worker delivers it to an HTTP endpoint
// (a PHP-FPM route, a Spring controller, any language) instead of running
// Go code, with every guarantee the ledger gives (the row before the call,
// retries with backoff, dead letters, recovery).
//
// A Target is a queue.Handler. It sends the job's payload as the body, as
// is, with headers naming the job (Delayq-Topic, Delayq-Job-Id,
// Delayq-Attempt, Delayq-Delivery, Delayq-Max-Attempts, Delayq-Due-At in
// Unix ms), an
// Idempotency-Key that is "<topic>:<job id>" on every attempt, the time of
// sending (Delayq-Timestamp, Unix seconds) and, with a secret, a signature:
//
//	Delayq-Signature: v1=<lowercase hex of HMAC-SHA256(secret, timestamp + "." + body)>
//
// With tracing on (tracing.enabled), the run's span goes along as a W3C
// traceparent header, so the receiver's spans join the job's trace, which
// began with its enqueue (docs/design.md §4.21).
//
// The answer decides the outcome (docs/design.md §4.12): a success status
// (2xx by default) completes the job; 429 and 503 with a Retry-After retry
// it then; a permanent status (4xx other than 408 and 429 by default) or a
// redirect buries it at once; anything else (other statuses, timeouts,
// connection errors) retries it with the topic's backoff.
//
// Targets come from the operator's configuration only, never from a job or
// an API caller: nothing in a job can change where it is sent.
package httptarget
