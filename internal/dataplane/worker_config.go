package dataplane

import "time"

// prefetchOf is the most jobs beyond the free slots the fetcher may hold
// while the topic has a backlog.
func prefetchOf(c TopicConfig) int {
	if c.Prefetch < 0 || c.RateLimit > 0 {
		return 0
	}
	return c.Prefetch
}

// claimAheadOf is how far ahead of due the fetcher claims: none on a
// rate-limited topic, whose claims pace its starts (jobs claimed a little
// apart but due together would start together).
func claimAheadOf(c TopicConfig) time.Duration {
	if c.ClaimAhead < 0 || c.RateLimit > 0 {
		return 0
	}
	return c.ClaimAhead
}

// rateLimitOf is the topic's limit as the claim script takes it.
func rateLimitOf(c TopicConfig) RateLimit {
	return RateLimit{PerSecond: c.RateLimit, Burst: c.RateBurst}
}
