package backend

import (
	"crypto/tls"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/config"
)

// openRedis connects to the configured Redis, or starts the embedded one on
// a loopback port (so redis-cli can look at it too).
func (b *Backends) openRedis(c config.Redis, log logrus.FieldLogger) (redis.UniversalClient, error) {
	var tlsConfig *tls.Config
	if c.TLS {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	opts := &redis.UniversalOptions{
		Addrs:     c.Addrs,
		Username:  c.Username,
		Password:  c.Password,
		DB:        c.DB,
		PoolSize:  c.PoolSize,
		TLSConfig: tlsConfig,
	}
	var rdb redis.UniversalClient
	switch c.Mode {
	case "embedded":
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("backend: start the embedded Redis: %w", err)
		}
		b.closers = append(b.closers, func() error { m.Close(); return nil })
		b.Embedded = true
		log.WithField("addr", m.Addr()).Warn("embedded Redis (miniredis) started: nothing survives a restart")
		rdb = redis.NewClient(&redis.Options{Addr: m.Addr()})
	case "single":
		rdb = redis.NewClient(opts.Simple())
	case "sentinel":
		opts.MasterName = c.MasterName
		rdb = redis.NewFailoverClient(opts.Failover())
	case "cluster":
		rdb = redis.NewClusterClient(opts.Cluster())
	default:
		return nil, fmt.Errorf("backend: redis.mode %q", c.Mode)
	}
	b.closers = append(b.closers, rdb.Close)
	return rdb, nil
}
