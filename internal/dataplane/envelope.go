package dataplane

import (
	"bytes"
	"fmt"
	"strconv"
)

// The envelope is how the job hash stores a job:
//
//	1|attempt|max attempts|enqueued at|run at|len(last error)|last error|payload
//
// A text header in front of the raw payload keeps the payload binary safe
// and, when it is JSON, readable in redis-cli; the Lua scripts can rewrite the
// attempt or the error with one pattern match and never parse the payload.
// The leading "1" is the format version.

// encodeEnvelope builds an envelope; the scripts build the same shape.
func encodeEnvelope(j *Job) []byte {
	b := make([]byte, 0, 48+len(j.LastError)+len(j.Payload))
	b = append(b, "1|"...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, j.EnqueuedAt, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, j.RunAt, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(len(j.LastError)), 10)
	b = append(b, '|')
	b = append(b, j.LastError...)
	b = append(b, '|')
	return append(b, j.Payload...)
}

// decodeEnvelope fills j's envelope fields from raw. The payload is copied,
// so raw may be reused.
func decodeEnvelope(raw []byte, j *Job) error {
	var nums [6]int64
	rest := raw
	for i := range nums {
		k := bytes.IndexByte(rest, '|')
		if k < 0 {
			return fmt.Errorf("%w: field %d missing", ErrBadEnvelope, i)
		}
		n, err := strconv.ParseInt(string(rest[:k]), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: field %d not a number", ErrBadEnvelope, i)
		}
		nums[i] = n
		rest = rest[k+1:]
	}
	if nums[0] != 1 {
		return fmt.Errorf("%w: version %d", ErrBadEnvelope, nums[0])
	}
	elen := nums[5]
	// Compared without adding to elen: elen+1 wraps negative for
	// math.MaxInt64, and rest[elen] would then index out of range.
	if elen >= int64(len(rest)) || rest[elen] != '|' {
		return fmt.Errorf("%w: error text length %d", ErrBadEnvelope, elen)
	}
	j.Attempt = int(nums[1])
	j.MaxAttempts = int(nums[2])
	j.EnqueuedAt = nums[3]
	j.RunAt = nums[4]
	j.LastError = string(rest[:elen])
	j.Payload = append([]byte(nil), rest[elen+1:]...)
	return nil
}
