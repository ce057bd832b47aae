// Package redislock is a lock with a TTL and an owner token in Redis: one
// holder at a time across processes and hosts, released only by its owner,
// and freed by itself when the owner dies (the TTL runs out). delayq's cron
// jobs (the recoverer, the order sweeper) take it so that one process at a
// time runs them.
package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotHeld is returned by Refresh and Release when the lock is not (or no
// longer) held by this Lock: it expired and someone else may hold it.
var ErrNotHeld = errors.New("lock not held")

// compareAndDelete deletes KEYS[1] if it holds ARGV[1] (the owner token).
// Returns 1 if deleted, 0 if the key is absent or held by another owner.
var compareAndDelete = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// compareAndExpire sets KEYS[1]'s TTL to ARGV[2] ms if it holds ARGV[1].
// Returns 1 if refreshed, 0 if the key is absent or held by another owner.
var compareAndExpire = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)

// Lock is one would-be holder of a named lock. It is not safe for
// concurrent use: give each goroutine its own.
type Lock struct {
	rdb   redis.UniversalClient
	key   string
	ttl   time.Duration
	owner string // WithOwner's, the start of each token
	token string // set while held
}

// New returns a Lock on key with the given TTL (at least 1 ms).
func New(rdb redis.UniversalClient, key string, ttl time.Duration) *Lock {
	return &Lock{rdb: rdb, key: key, ttl: max(ttl, time.Millisecond)}
}

// WithOwner names this would-be holder (host:pid, say; no spaces) in the
// lock's value, so that the others can tell who holds it (Holder). It
// returns l; call it before taking the lock.
func (l *Lock) WithOwner(owner string) *Lock {
	l.owner = owner
	return l
}

// Holder tells who holds the lock now: held is false if nobody does;
// owner is what the holder gave WithOwner ("" if nothing), and ttl how
// long the lock lives unless refreshed.
func (l *Lock) Holder(ctx context.Context) (owner string, ttl time.Duration, held bool, err error) {
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, l.key)
		pttl = p.PTTL(ctx, l.key)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("redislock %s: holder: %w", l.key, err)
	}
	v := get.Val()
	if i := strings.LastIndexByte(v, ' '); i >= 0 {
		owner = v[:i]
	}
	return owner, max(pttl.Val(), 0), true, nil
}

// TryAcquire takes the lock if nobody holds it. It reports whether it did;
// a lock held by another owner is not an error.
func (l *Lock) TryAcquire(ctx context.Context) (bool, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return false, fmt.Errorf("redislock %s: token: %w", l.key, err)
	}
	token := hex.EncodeToString(b)
	if l.owner != "" {
		token = l.owner + " " + token
	}
	ok, err := l.rdb.SetNX(ctx, l.key, token, l.ttl).Result()
	if err != nil {
		return false, fmt.Errorf("redislock %s: acquire: %w", l.key, err)
	}
	if ok {
		l.token = token
	}
	return ok, nil
}

// Refresh extends a held lock by its TTL. It returns ErrNotHeld if the lock
// expired meanwhile.
func (l *Lock) Refresh(ctx context.Context) error {
	if l.token == "" {
		return fmt.Errorf("redislock %s: refresh: %w", l.key, ErrNotHeld)
	}
	n, err := compareAndExpire.Run(ctx, l.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("redislock %s: refresh: %w", l.key, err)
	}
	if n == 0 {
		l.token = ""
		return fmt.Errorf("redislock %s: refresh: %w", l.key, ErrNotHeld)
	}
	return nil
}

// Release frees a held lock. A lock that expired and was taken by another
// owner is left alone, and ErrNotHeld returned.
func (l *Lock) Release(ctx context.Context) error {
	if l.token == "" {
		return fmt.Errorf("redislock %s: release: %w", l.key, ErrNotHeld)
	}
	token := l.token
	l.token = ""
	n, err := compareAndDelete.Run(ctx, l.rdb, []string{l.key}, token).Int()
	if err != nil {
		return fmt.Errorf("redislock %s: release: %w", l.key, err)
	}
	if n == 0 {
		return fmt.Errorf("redislock %s: release: %w", l.key, ErrNotHeld)
	}
	return nil
}

// Do runs fn while holding the lock, if it can be taken; it reports whether
// fn ran. The lock is refreshed every TTL/3 while fn runs; if a refresh
// finds the lock lost, fn's context is cancelled with ErrNotHeld as cause.
// The lock is released when fn returns.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) (bool, error) {
	ok, err := l.TryAcquire(ctx)
	if err != nil || !ok {
		return false, err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		t := time.NewTicker(max(l.ttl/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-fctx.Done():
				return
			case <-t.C:
				if err := l.Refresh(fctx); errors.Is(err, ErrNotHeld) {
					cancel(ErrNotHeld)
					return
				}
			}
		}
	}()
	ferr := fn(fctx)
	cancel(nil)
	<-refreshed
	if l.token != "" {
		// The release outlives a cancelled ctx: a lock left behind blocks
		// every other process until its TTL runs out.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if err := l.Release(rctx); err != nil && ferr == nil && !errors.Is(err, ErrNotHeld) {
			ferr = err
		}
	}
	return true, ferr
}
