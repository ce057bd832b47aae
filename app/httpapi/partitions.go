package httpapi

import (
	"net/http"

	"github.com/delayq/delayq/queue"
	"github.com/sirupsen/logrus"
)

// PartitionsRequest is the body of PUT /v1/topics/{topic}/partitions.
type PartitionsRequest struct {
	// Partitions is the topic's new partition count, 1-256, no lower than
	// its current one.
	Partitions *int `json:"partitions"`
}

// PartitionsResponse answers GET and PUT /v1/topics/{topic}/partitions:
// the count enqueues use, and every count whose partitions may still hold
// jobs (ascending; the last is the current one).
type PartitionsResponse struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Layouts    []int  `json:"layouts"`
}

// NewPartitionsResponse renders a topic's layout (Engine.Partitions,
// dataplane.Layout.Public).
func NewPartitionsResponse(topic string, p queue.Partitions) PartitionsResponse {
	return PartitionsResponse{Topic: topic, Partitions: p.Current, Layouts: p.Layouts}
}

// getPartitions handles GET /v1/topics/{topic}/partitions.
func (a *api) getPartitions(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	l, err := a.q.Layout(r.Context(), topic)
	if err != nil {
		return fromRedis(err)
	}
	writeJSON(w, http.StatusOK, NewPartitionsResponse(topic, l.Public()))
	return nil
}

// setPartitions handles PUT /v1/topics/{topic}/partitions: it raises the
// topic's partition count (docs/design.md §7.1), logged as an audit line.
func (a *api) setPartitions(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	if err := a.refuseReadOnly("changing a topic's partitions"); err != nil {
		return err
	}
	var req PartitionsRequest
	if err := a.decodeBody(r, &req, false); err != nil {
		return err
	}
	if req.Partitions == nil {
		return badRequest(CodeMissingField, "partitions", `give "partitions": the new partition count`)
	}
	l, err := a.q.SetPartitions(r.Context(), topic, *req.Partitions)
	if err != nil {
		return fromRedis(err)
	}
	a.log.WithFields(logrus.Fields{"topic": topic, "partitions": l.Current(), "actor": actor(r), "remote": r.RemoteAddr}).
		Info("httpapi: topic partitions set")
	writeJSON(w, http.StatusOK, NewPartitionsResponse(topic, l.Public()))
	return nil
}
