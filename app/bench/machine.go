package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Machine describes where the figures were taken: the host, Redis and the
// SQL server, and the round trip to Redis measured at the same time.
type Machine struct {
	Time       string `json:"time"`
	Host       string `json:"host"`
	OS         string `json:"os"`
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model,omitempty"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	// LoadAvg is the host's 1, 5 and 15 minute load averages when the
	// bench started (Linux): a busy host makes every figure lower.
	LoadAvg string `json:"load_avg,omitempty"`

	// Redis is its version and where it is ("7.0.15 at 127.0.0.1:6379"),
	// RedisPersistence its AOF and RDB settings.
	Redis            string `json:"redis"`
	RedisPersistence string `json:"redis_persistence,omitempty"`
	// PingRTT is the median PING round trip on one connection, in µs, and
	// PingsPerSec what one connection did back to back: the same figure
	// as redis-benchmark -c 1 -t ping.
	PingRTT     float64 `json:"redis_ping_rtt_us"`
	PingsPerSec float64 `json:"redis_pings_per_s"`

	// SQL is the ledger's server and version; SQLDurability the settings
	// that decide what a commit costs.
	SQL           string `json:"sql"`
	SQLDurability string `json:"sql_durability,omitempty"`
}

// pingSamples is how many PINGs measure the round trip.
const pingSamples = 2000

// Describe reads the machine's details from the host and the backends. What
// a backend does not tell is left empty or says so; it never fails.
func Describe(ctx context.Context, env Env) Machine {
	host, _ := os.Hostname()
	m := Machine{
		Time:       time.Now().UTC().Format(time.RFC3339),
		Host:       host,
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		CPUModel:   cpuModel(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		LoadAvg:    loadAvg(),
	}
	if env.Redis != nil {
		m.Redis, m.RedisPersistence = describeRedis(ctx, env.Redis)
		m.PingRTT, m.PingsPerSec = pingBaseline(ctx, env.Redis)
	}
	if env.DB != nil {
		m.SQL, m.SQLDurability = describeSQL(ctx, env.DB)
	}
	return m
}

// cpuModel reads the processor's name on Linux ("" elsewhere).
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAvg reads the load averages on Linux ("" elsewhere).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func describeRedis(ctx context.Context, rdb redis.UniversalClient) (version, persistence string) {
	where := "a cluster"
	if c, ok := rdb.(*redis.Client); ok {
		where = c.Options().Addr
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		if strings.Contains(err.Error(), "not supported") {
			return "miniredis (embedded, in process) at " + where, ""
		}
		return fmt.Sprintf("unknown (INFO: %v) at %s", err, where), ""
	}
	version = infoFields(info)["redis_version"] + " at " + where
	if p, err := rdb.Info(ctx, "persistence").Result(); err == nil {
		f := infoFields(p)
		persistence = "aof_enabled=" + f["aof_enabled"]
		if f["aof_enabled"] == "1" {
			if v, err := rdb.ConfigGet(ctx, "appendfsync").Result(); err == nil {
				persistence += " appendfsync=" + v["appendfsync"]
			}
		}
		if v, err := rdb.ConfigGet(ctx, "save").Result(); err == nil {
			persistence += fmt.Sprintf(" save=%q", v["save"])
		}
	}
	return version, persistence
}

// pingBaseline measures PING round trips on one connection, back to back.
func pingBaseline(ctx context.Context, rdb redis.UniversalClient) (medianUs, perSec float64) {
	// A connection of its own, so the pool's other connections are not
	// counted and nothing else shares this one.
	var conn interface {
		Ping(ctx context.Context) *redis.StatusCmd
		Close() error
	}
	if c, ok := rdb.(*redis.Client); ok {
		cn := c.Conn()
		conn = cn
	} else {
		conn = nopCloser{rdb}
	}
	defer conn.Close()
	rtts := make([]int64, 0, pingSamples)
	start := time.Now()
	for range pingSamples {
		t0 := time.Now()
		if err := conn.Ping(ctx).Err(); err != nil {
			return 0, 0
		}
		rtts = append(rtts, time.Since(t0).Nanoseconds())
	}
	total := time.Since(start)
	slices.Sort(rtts)
	return float64(rtts[len(rtts)/2]) / 1000, float64(pingSamples) / total.Seconds()
}

type nopCloser struct{ redis.UniversalClient }

func (nopCloser) Close() error { return nil }

func describeSQL(ctx context.Context, db *gorm.DB) (version, durability string) {
	switch db.Dialector.Name() {
	case "mysql":
		var v string
		if err := db.WithContext(ctx).Raw("SELECT VERSION()").Scan(&v).Error; err != nil {
			return fmt.Sprintf("MySQL (VERSION(): %v)", err), ""
		}
		server := "MySQL"
		if strings.Contains(strings.ToLower(v), "mariadb") {
			server = "MariaDB"
		}
		var rows []variableRow
		err := db.WithContext(ctx).Raw("SHOW GLOBAL VARIABLES WHERE Variable_name IN " +
			"('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin', 'innodb_flush_method', 'innodb_buffer_pool_size')").
			Scan(&rows).Error
		if err == nil {
			slices.SortFunc(rows, func(a, b variableRow) int { return strings.Compare(a.Name, b.Name) })
			parts := make([]string, len(rows))
			for i, r := range rows {
				parts[i] = r.Name + "=" + r.Value
			}
			durability = strings.Join(parts, " ")
		}
		return server + " " + v, durability
	case "sqlite":
		var v string
		if err := db.WithContext(ctx).Raw("SELECT sqlite_version()").Scan(&v).Error; err != nil {
			return "SQLite (embedded)", ""
		}
		return "SQLite " + v + " (embedded)", ""
	default:
		return db.Dialector.Name(), ""
	}
}
