package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// costs is what the run's tasks cost, counted rather than timed, under
// the names of delayq bench's costs: commands and CPU time stay put when
// the machine's speed changes, where jobs/s does not. Redis's figures are
// server-wide (other clients' work counts too); asynq writes no SQL.
type costs struct {
	Jobs                   int      `json:"jobs"`
	Seconds                float64  `json:"seconds"`
	RedisCommands          *int64   `json:"redis_commands"`
	RedisCommandsPerJob    *float64 `json:"redis_commands_per_job"`
	RedisScriptCalls       *int64   `json:"redis_script_calls"`
	RedisScriptCallsPerJob *float64 `json:"redis_script_calls_per_job"`
	ProcessCPUUs           int64    `json:"process_cpu_us"`
	ProcessCPUUsPerJob     float64  `json:"process_cpu_us_per_job"`
	RedisCPUUs             *int64   `json:"redis_cpu_us"`
	RedisCPUUsPerJob       *float64 `json:"redis_cpu_us_per_job"`
}

// probe is one reading of the counters.
type probe struct {
	at       time.Time
	cpu      time.Duration    // this process
	redisCPU float64          // seconds; <0 when unknown
	calls    map[string]int64 // INFO commandstats calls; nil when unknown
}

func readProbe(ctx context.Context, rdb *redis.Client) probe {
	p := probe{at: time.Now(), redisCPU: -1}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		p.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if info, err := rdb.Info(ctx, "cpu").Result(); err == nil {
		f := infoFields(info)
		sys, err1 := strconv.ParseFloat(f["used_cpu_sys"], 64)
		usr, err2 := strconv.ParseFloat(f["used_cpu_user"], 64)
		if err1 == nil && err2 == nil {
			p.redisCPU = sys + usr
		}
	}
	if info, err := rdb.Info(ctx, "commandstats").Result(); err == nil {
		p.calls = make(map[string]int64)
		for k, v := range infoFields(info) {
			name, ok := strings.CutPrefix(k, "cmdstat_")
			if !ok {
				continue
			}
			for _, kv := range strings.Split(v, ",") {
				if f, val, _ := strings.Cut(kv, "="); f == "calls" {
					p.calls[name], _ = strconv.ParseInt(val, 10, 64)
				}
			}
		}
	}
	return p
}

// costsBetween counts from a to b for jobs tasks; the probes' own INFO is
// left out of the commands.
func costsBetween(a, b probe, jobs int) costs {
	c := costs{Jobs: jobs, Seconds: b.at.Sub(a.at).Seconds(), ProcessCPUUs: (b.cpu - a.cpu).Microseconds()}
	per := func(n int64) *float64 {
		if jobs <= 0 {
			return nil
		}
		v := float64(n) / float64(jobs)
		return &v
	}
	if jobs > 0 {
		c.ProcessCPUUsPerJob = float64(c.ProcessCPUUs) / float64(jobs)
	}
	if a.calls != nil && b.calls != nil {
		var all, scripts int64
		for name, n := range b.calls {
			d := n - a.calls[name]
			if name == "info" || d <= 0 {
				continue
			}
			all += d
			switch name {
			case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
				scripts += d
			}
		}
		c.RedisCommands, c.RedisScriptCalls = &all, &scripts
		c.RedisCommandsPerJob, c.RedisScriptCallsPerJob = per(all), per(scripts)
	}
	if a.redisCPU >= 0 && b.redisCPU >= 0 {
		us := int64(math.Round((b.redisCPU - a.redisCPU) * 1e6))
		c.RedisCPUUs = &us
		c.RedisCPUUsPerJob = per(us)
	}
	return c
}

// infoFields parses an INFO reply into its key:value fields.
func infoFields(info string) map[string]string {
	out := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// deleteQueue removes every key of the run's queue (asynq:{<queue>}:...)
// and its name from asynq's set of queues.
func deleteQueue(ctx context.Context, rdb *redis.Client, queue string) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, "asynq:{"+queue+"}:*", 1000).Result()
		if err != nil {
			return fmt.Errorf("delete queue %s: %w", queue, err)
		}
		if len(keys) > 0 {
			if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("delete queue %s: %w", queue, err)
			}
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if err := rdb.SRem(ctx, "asynq:queues", queue).Err(); err != nil {
		return fmt.Errorf("delete queue %s: %w", queue, err)
	}
	return nil
}
