package queue

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
)

//go:embed lua/list.lua
var listLua string

// Page is one page of a topic's jobs in one state.
type Page struct {
	Total int64      // jobs in that state in all
	Jobs  []*JobInfo // this page, in order
}

// MaxPage is the largest page List returns.
const MaxPage = 1000

// List returns limit jobs of topic in state (scheduled, in flight or dead)
// from offset: dead jobs newest first, the others earliest first.
func (c *Client) List(ctx context.Context, topic string, state State, offset, limit int) (*Page, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if offset < 0 || limit < 1 || limit > MaxPage {
		return nil, fmt.Errorf("queue: list %s: offset %d, limit %d: want offset >= 0 and limit 1-%d", topic, offset, limit, MaxPage)
	}
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	set, order := "", "asc"
	switch state {
	case StateScheduled:
		set = k.due
	case StateInFlight:
		set = k.lease
	case StateDead:
		set, order = k.dead, "desc"
	default:
		return nil, fmt.Errorf("queue: list %s: cannot list state %q", topic, state)
	}
	reply, err := c.listScript.Run(ctx, c.rdb, []string{set, k.job}, order, offset, limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: list %s %s: %w", topic, state, err)
	}
	p := &Page{Total: asInt64(reply[0])}
	for i := 1; i+2 < len(reply); i += 3 {
		id, _ := reply[i].(string)
		score, _ := reply[i+1].(string)
		f, _ := strconv.ParseFloat(score, 64)
		info := &JobInfo{State: state, Score: int64(f), Job: &Job{Topic: topic, ID: id}}
		if env, ok := reply[i+2].(string); ok {
			if err := decodeEnvelope([]byte(env), info.Job); err != nil {
				return nil, fmt.Errorf("queue: list %s: job %s: %w", topic, id, err)
			}
		}
		if state == StateInFlight {
			info.Job.LeaseUntil = info.Score
		}
		p.Jobs = append(p.Jobs, info)
	}
	return p, nil
}
