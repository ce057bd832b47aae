package recoverer

import "github.com/delayq/delayq/recovery"

// The job model, the handler contract and the configuration are package
// queue's; these names let the data plane use them unqualified.

const WakeCheck = recovery.WakeCheck
const WakeRecheck = recovery.WakeRecheck
const WakeError = recovery.WakeError
const WakeFull = recovery.WakeFull
const WakeLead = recovery.WakeLead
const WakeLoad = recovery.WakeLoad
const WakeLost = recovery.WakeLost
const WakeNote = recovery.WakeNote
const WakeOnce = recovery.WakeOnce

type Config = recovery.Config
type Counters = recovery.Counters
type RelayConfig = recovery.RelayConfig
type RelayReport = recovery.RelayReport
type RelayTotals = recovery.RelayTotals
type Report = recovery.Report
type TopicCounts = recovery.TopicCounts
type TopicLoss = recovery.TopicLoss
