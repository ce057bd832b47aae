package dataplane

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Each script is one atomic step of the job lifecycle; its .lua file opens
// with the KEYS, ARGV and reply it works with. redis.Script runs them with
// EVALSHA and loads them on NOSCRIPT.
var (
	// orderingLua is per-key ordering's functions, put before the scripts
	// that place, end or move a job of an ordering key (docs/design.md
	// §4.24).
	//go:embed lua/ordering.lua
	orderingLua string
	//go:embed lua/enqueue.lua
	enqueueLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/ack.lua
	ackLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/retry.lua
	retryLua string
	//go:embed lua/bury.lua
	buryLua string
	//go:embed lua/extend.lua
	extendLua string
	//go:embed lua/cancel.lua
	cancelLua string
	//go:embed lua/cancelrun.lua
	cancelRunLua string
	//go:embed lua/requeue.lua
	requeueLua string
	//go:embed lua/purge.lua
	purgeLua string
	//go:embed lua/get.lua
	getLua string
	//go:embed lua/stats.lua
	statsLua string
	//go:embed lua/restore.lua
	restoreLua string
	//go:embed lua/resume.lua
	resumeLua string
	//go:embed lua/reschedule.lua
	rescheduleLua string
	//go:embed lua/periodic.lua
	periodicLua string
	//go:embed lua/relaynext.lua
	relayNextLua string
	//go:embed lua/relayunnote.lua
	relayUnnoteLua string
	//go:embed lua/relaymark.lua
	relayMarkLua string
	//go:embed lua/deletedead.lua
	deleteDeadLua string
	//go:embed lua/minuteadd.lua
	minuteAddLua string
	//go:embed lua/minutes.lua
	minutesLua string
	//go:embed lua/ratetake.lua
	rateTakeLua string
	//go:embed lua/orderheal.lua
	orderHealLua string
)

// scripts holds the compiled scripts of one Client (no package-level state).
type scripts struct {
	enqueue, claim, ack, release, retry, bury, extend *redis.Script
	cancel, cancelRun, requeue, purge, get, stats     *redis.Script
	restore, resume, reschedule, periodic             *redis.Script
	relayNext, relayUnnote, relayMark                 *redis.Script
	deleteDead, minuteAdd, minutes, rateTake          *redis.Script
	orderHeal                                         *redis.Script
}

func newScripts() scripts {
	return scripts{
		enqueue:     redis.NewScript(orderingLua + enqueueLua),
		claim:       redis.NewScript(orderingLua + claimLua),
		ack:         redis.NewScript(orderingLua + ackLua),
		release:     redis.NewScript(orderingLua + releaseLua),
		retry:       redis.NewScript(retryLua),
		bury:        redis.NewScript(orderingLua + buryLua),
		extend:      redis.NewScript(extendLua),
		cancel:      redis.NewScript(orderingLua + cancelLua),
		cancelRun:   redis.NewScript(cancelRunLua),
		requeue:     redis.NewScript(orderingLua + requeueLua),
		purge:       redis.NewScript(purgeLua),
		get:         redis.NewScript(getLua),
		stats:       redis.NewScript(statsLua),
		restore:     redis.NewScript(orderingLua + restoreLua),
		reschedule:  redis.NewScript(orderingLua + rescheduleLua),
		resume:      redis.NewScript(resumeLua),
		periodic:    redis.NewScript(periodicLua),
		relayNext:   redis.NewScript(relayNextLua),
		relayUnnote: redis.NewScript(relayUnnoteLua),
		relayMark:   redis.NewScript(relayMarkLua),
		deleteDead:  redis.NewScript(deleteDeadLua),
		minuteAdd:   redis.NewScript(minuteAddLua),
		minutes:     redis.NewScript(minutesLua),
		rateTake:    redis.NewScript(rateTakeLua),
		orderHeal:   redis.NewScript(orderingLua + orderHealLua),
	}
}

// scriptCall is one call of a script: its keys and arguments, or the
// error that keeps it from being sent.
type scriptCall struct {
	keys []string
	args []any
	err  error
}

// runEach runs s once per call in one pipeline (one round trip, or one per
// node of a Redis Cluster), with EVALSHA; the calls a server answers
// NOSCRIPT (it restarted, or is new to the cluster) are sent again with
// the script's body in a second pipeline. Each command holds its call's
// reply or error. also, if set, adds commands to the first pipeline, after
// the calls.
func (c *Client) runEach(ctx context.Context, s *redis.Script, calls []scriptCall, also func(redis.Pipeliner)) []*redis.Cmd {
	return c.runEachAround(ctx, s, calls, nil, also)
}

// runEachAround is runEach with before, if set, adding commands to the
// first pipeline ahead of the calls.
func (c *Client) runEachAround(ctx context.Context, s *redis.Script, calls []scriptCall, before, also func(redis.Pipeliner)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	pipe := c.rdb.Pipeline()
	if before != nil {
		before(pipe)
	}
	for i, call := range calls {
		if call.err != nil {
			cmds[i] = redis.NewCmd(ctx)
			cmds[i].SetErr(call.err)
			continue
		}
		cmds[i] = s.EvalSha(ctx, pipe, call.keys, call.args...)
	}
	if also != nil {
		also(pipe)
	}
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe = c.rdb.Pipeline()
		for _, i := range again {
			cmds[i] = s.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds
}
