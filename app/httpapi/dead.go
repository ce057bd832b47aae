package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// RequeueRequest is the body of POST /v1/topics/{topic}/dead/requeue: one
// job by id, or all of the topic's dead jobs.
type RequeueRequest struct {
	ID  string `json:"id,omitempty"`
	All bool   `json:"all,omitempty"`
}

// RequeueResponse says how many dead jobs went back to due.
type RequeueResponse struct {
	Requeued int `json:"requeued"`
}

// PurgeRequest is the body of POST /v1/topics/{topic}/dead/purge.
type PurgeRequest struct {
	// Before deletes the jobs that died at or before it, Unix ms; absent
	// means now (every dead job).
	Before *int64 `json:"before,omitempty"`
}

// PurgeResponse says how many dead jobs were deleted.
type PurgeResponse struct {
	Purged int   `json:"purged"`
	Before int64 `json:"before"`
}

// DeleteDeadResponse is the answer of DELETE
// /v1/topics/{topic}/dead/jobs/{id...}: the dead job deleted for good.
type DeleteDeadResponse struct {
	Topic   string `json:"topic"`
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"` // always true: a job that is not dead is a 404
}

// refuseReadOnly is the 403 of state-changing operator routes in read-only
// mode.
func (a *api) refuseReadOnly(what string) error {
	if !a.readOnly {
		return nil
	}
	return newError(http.StatusForbidden, CodeReadOnly, "", "the API is read-only: "+what+" is refused")
}

// requeueDead handles POST /v1/topics/{topic}/dead/requeue.
func (a *api) requeueDead(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	if err := a.refuseReadOnly("requeueing dead jobs"); err != nil {
		return err
	}
	var req RequeueRequest
	if err := a.decodeBody(r, &req, false); err != nil {
		return err
	}
	switch {
	case req.ID != "" && req.All:
		return badRequest(CodeConflictingFields, "all", `give "id" or "all": true, not both`)
	case req.ID == "" && !req.All:
		return badRequest(CodeMissingField, "id", `give "id" (one job) or "all": true`)
	}
	log := a.log.WithField("topic", topic)
	if req.All {
		n, err := a.q.RequeueAllDead(r.Context(), topic)
		if err != nil {
			// Chunks already moved stay moved; the log says how many.
			log.WithField("requeued", n).WithError(err).Warn("httpapi: requeue of all dead jobs stopped part way")
			return fromRedis(err)
		}
		log.WithField("requeued", n).Info("httpapi: dead jobs requeued")
		writeJSON(w, http.StatusOK, RequeueResponse{Requeued: n})
		return nil
	}
	if err := a.q.RequeueDead(r.Context(), topic, req.ID); err != nil {
		if errors.Is(err, queue.ErrNotFound) {
			return newError(http.StatusNotFound, CodeNotFound, "id", fmt.Sprintf("no dead job %q in topic %q", req.ID, topic))
		}
		return fromRedis(err)
	}
	log.WithField("id", req.ID).Info("httpapi: dead job requeued")
	writeJSON(w, http.StatusOK, RequeueResponse{Requeued: 1})
	return nil
}

// purgeDead handles POST /v1/topics/{topic}/dead/purge. The body is
// optional: none purges every job dead by now.
func (a *api) purgeDead(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	if err := a.refuseReadOnly("purging dead jobs"); err != nil {
		return err
	}
	var req PurgeRequest
	if err := a.decodeBody(r, &req, true); err != nil {
		return err
	}
	before := time.Now().UnixMilli()
	if req.Before != nil {
		if *req.Before <= 0 {
			return badRequest(CodeInvalidValue, "before", "before %d: want Unix milliseconds", *req.Before)
		}
		before = *req.Before
	}
	n, err := PurgeDead(r.Context(), a.q, a.sh, a.log, topic, before)
	if err != nil {
		a.log.WithFields(logrus.Fields{"topic": topic, "purged": n}).WithError(err).Warn("httpapi: purge of dead jobs stopped part way")
		return fromRedis(err)
	}
	a.log.WithFields(logrus.Fields{"topic": topic, "purged": n, "before": before}).Info("httpapi: dead jobs purged")
	writeJSON(w, http.StatusOK, PurgeResponse{Purged: n, Before: before})
	return nil
}

// deleteDead handles DELETE /v1/topics/{topic}/dead/jobs/{id...}.
func (a *api) deleteDead(w http.ResponseWriter, r *http.Request) error {
	topic, id := r.PathValue("topic"), r.PathValue("id")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	if err := a.refuseReadOnly("deleting dead jobs"); err != nil {
		return err
	}
	if err := DeleteDead(r.Context(), a.q, a.sh, a.log, topic, id); err != nil {
		if errors.Is(err, queue.ErrNotFound) {
			return newError(http.StatusNotFound, CodeNotFound, "id", fmt.Sprintf("no dead job %q in topic %q", id, topic))
		}
		return fromRedis(err)
	}
	a.log.WithFields(logrus.Fields{"topic": topic, "id": id}).Info("httpapi: dead job deleted")
	writeJSON(w, http.StatusOK, DeleteDeadResponse{Topic: topic, ID: id, Deleted: true})
	return nil
}

// DeleteDead deletes one dead job from Redis, then turns its history rows
// to purged, as the API and the CLI both do; queue.ErrNotFound when the
// job is not dead. As with PurgeDead, a failure of the second step is
// logged and leaves the rows saying dead.
func DeleteDead(ctx context.Context, q *dataplane.Client, l *ledger.Shards, log logrus.FieldLogger, topic, id string) error {
	if err := queue.ValidateID(id); err != nil {
		return err
	}
	if err := q.DeleteDead(ctx, topic, id); err != nil {
		return err
	}
	if _, err := l.MarkPurgedID(ctx, topic, id); err != nil {
		log.WithError(err).WithFields(logrus.Fields{"topic": topic, "id": id}).Warn("deleted dead job's history still says dead")
	}
	return nil
}

// PurgeDead deletes topic's dead jobs that died at or before before from
// Redis's dead set, then turns their history rows to purged, as the API
// and the CLI both do. Redis's purge is done whatever SQL says: a failure
// of the second step leaves the rows saying dead, and is logged.
func PurgeDead(ctx context.Context, q *dataplane.Client, l *ledger.Shards, log logrus.FieldLogger, topic string, before int64) (int, error) {
	n, err := q.PurgeDead(ctx, topic, before)
	if err != nil {
		return n, err
	}
	if _, err := l.MarkPurged(ctx, topic, before); err != nil {
		log.WithError(err).WithField("topic", topic).Warn("purged dead jobs' history still says dead")
	}
	return n, nil
}
