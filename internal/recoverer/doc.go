// Package recoverer runs the recoverer and the relay that package
// queue/engine starts: the cron-driven pass that puts back what a dead
// worker or a Redis data loss dropped, and the loading of durable topics'
// jobs into Redis as they come within the horizon. Their configuration and
// reports are package recovery's.
package recoverer
