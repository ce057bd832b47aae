package dataplane

import (
	"time"

	"github.com/delayq/delayq/queue"
)

// The job model, the handler contract and the configuration are package
// queue's; these names let the data plane use them unqualified.

const BatchCreated = queue.BatchCreated
const BatchDuplicate = queue.BatchDuplicate
const BatchInvalid = queue.BatchInvalid
const DefaultRateStartLag = queue.DefaultRateStartLag
const DurabilityDurable = queue.DurabilityDurable
const DurabilityRedis = queue.DurabilityRedis
const FinishedCancelled = queue.FinishedCancelled
const FinishedPurged = queue.FinishedPurged
const FinishedSucceeded = queue.FinishedSucceeded
const MaxConcurrency = queue.MaxConcurrency
const MaxPage = queue.MaxPage
const MaxRateBurst = queue.MaxRateBurst
const MaxRatePerSecond = queue.MaxRatePerSecond
const StateDead = queue.StateDead
const StateInFlight = queue.StateInFlight
const StateRetrying = queue.StateRetrying
const StateUnknown = queue.StateUnknown
const StateWaiting = queue.StateWaiting
const WhenAt = queue.WhenAt
const WhenBy = queue.WhenBy
const WhenIn = queue.WhenIn

func DefaultPrefetch(batchSize int) int            { return queue.DefaultPrefetch(batchSize) }
func DefaultRateBurst(perSecond float64) int       { return queue.DefaultRateBurst(perSecond) }
func ParseDurability(s string) (Durability, error) { return queue.ParseDurability(s) }
func RescheduleAt(at int64) When                   { return queue.RescheduleAt(at) }
func RescheduleBy(d time.Duration) When            { return queue.RescheduleBy(d) }
func RescheduleIn(d time.Duration) When            { return queue.RescheduleIn(d) }
func RescheduleResult(err error) string            { return queue.RescheduleResult(err) }
func RetryAfter(err error, d time.Duration) error  { return queue.RetryAfter(err, d) }
func SkipRetry(err error) error                    { return queue.SkipRetry(err) }
func ValidateID(id string) error                   { return queue.ValidateID(id) }
func ValidateTopic(topic string) error             { return queue.ValidateTopic(topic) }

type Backoff = queue.Backoff
type BatchResult = queue.BatchResult
type BatchStatus = queue.BatchStatus
type Config = queue.Config
type DeadJob = queue.DeadJob
type Durability = queue.Durability
type DurableStore = queue.DurableStore
type PartitionStore = queue.PartitionStore
type EnqueueCallObserver = queue.EnqueueCallObserver
type EnqueueObserver = queue.EnqueueObserver
type EnqueueResult = queue.EnqueueResult
type Finished = queue.Finished
type Enqueuer = queue.Enqueuer
type Handler = queue.Handler
type HandlerFunc = queue.HandlerFunc
type Job = queue.Job
type JobInfo = queue.JobInfo
type LayoutStore = queue.LayoutStore
type NewJob = queue.NewJob
type NopObserver = queue.NopObserver
type Observer = queue.Observer
type Page = queue.Page
type PanicError = queue.PanicError
type PauseState = queue.PauseState
type PauseStore = queue.PauseStore
type Pool = queue.Pool
type PushObserver = queue.PushObserver
type RateLimit = queue.RateLimit
type RateLimitObserver = queue.RateLimitObserver
type RescheduleObserver = queue.RescheduleObserver
type Rescheduled = queue.Rescheduled
type State = queue.State
type Stats = queue.Stats
type TakenObserver = queue.TakenObserver
type TickResult = queue.TickResult
type TopicConfig = queue.TopicConfig
type UnsettledObserver = queue.UnsettledObserver
type ValidationError = queue.ValidationError
type When = queue.When
type WorkerConfig = queue.WorkerConfig

var ErrBadEnvelope = queue.ErrBadEnvelope
var ErrBatchTooLarge = queue.ErrBatchTooLarge
var ErrCancelRequested = queue.ErrCancelRequested
var ErrContended = queue.ErrContended
var ErrDead = queue.ErrDead
var ErrInFlight = queue.ErrInFlight
var ErrInvalid = queue.ErrInvalid
var ErrInvalidID = queue.ErrInvalidID
var ErrInvalidPartition = queue.ErrInvalidPartition
var ErrOtherShard = queue.ErrOtherShard
var ErrInvalidMaxAttempts = queue.ErrInvalidMaxAttempts
var ErrInvalidPriority = queue.ErrInvalidPriority
var ErrInvalidOrderingKey = queue.ErrInvalidOrderingKey
var ErrInvalidRunAt = queue.ErrInvalidRunAt
var ErrInvalidTopic = queue.ErrInvalidTopic
var ErrLeaseExpired = queue.ErrLeaseExpired
var ErrLedger = queue.ErrLedger
var ErrNotApplied = queue.ErrNotApplied
var ErrNotDurable = queue.ErrNotDurable
var ErrNotFound = queue.ErrNotFound
var ErrPayloadTooLarge = queue.ErrPayloadTooLarge
var ErrShutdown = queue.ErrShutdown
var ErrSkipRetry = queue.ErrSkipRetry
var ErrTickDurable = queue.ErrTickDurable

func RetryRequested(err error, now int64) (runAt int64, ok bool) {
	return queue.RetryRequested(err, now)
}

type Ref = queue.Ref

const MaxAttempts = queue.MaxAttempts
const MaxPriority = queue.MaxPriority
const DefaultOldestEvery = queue.DefaultOldestEvery
const MaxOldestEvery = queue.MaxOldestEvery
const RecordPipeline = queue.RecordPipeline
