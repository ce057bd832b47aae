package scheduler

import (
	"time"

	"github.com/delayq/delayq/queue/periodic"
	"github.com/robfig/cron/v3"
)

// The job model, the handler contract and the configuration are package
// queue's; these names let the data plane use them unqualified.

const MissedOnce = periodic.MissedOnce
const ResultDuplicate = periodic.ResultDuplicate
const ResultEnqueued = periodic.ResultEnqueued
const ResultError = periodic.ResultError

func JobID(name string, tick time.Time) string { return periodic.JobID(name, tick) }
func ParseSpec(spec string, loc *time.Location) (cron.Schedule, error) {
	return periodic.ParseSpec(spec, loc)
}

type Error = periodic.Error
type Info = periodic.Info
type Missed = periodic.Missed
type Observer = periodic.Observer
type Options = periodic.Options
type Result = periodic.Result
type Schedule = periodic.Schedule
