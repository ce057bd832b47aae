// Package dataplane is delayq's Redis data plane and worker runtime: the
// Lua scripts over a topic's keys, the Client that runs them, and the
// Worker that claims, records, runs and settles jobs. It is internal: a
// service reaches it through package queue/engine, and package queue holds
// the job model, the handler contract and the configuration it shares with
// users.
package dataplane
