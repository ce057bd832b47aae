package dataplane

var _ Enqueuer = (*Client)(nil)
