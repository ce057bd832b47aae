package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/sirupsen/logrus"
)

// minTokenLen is the length below which a token is worth a warning: short
// enough to guess over the network.
const minTokenLen = 16

// bearerAuth checks "Authorization: Bearer <token>". It keeps only the
// token's SHA-256: comparing fixed-length digests in constant time leaks
// neither the token's bytes nor its length through timing.
type bearerAuth struct {
	sum [sha256.Size]byte
	log logrus.FieldLogger
}

func newBearerAuth(token string, log logrus.FieldLogger) (*bearerAuth, error) {
	if strings.TrimSpace(token) != token || strings.ContainsAny(token, " \t\r\n") {
		// A token read from a file with its newline would never match what
		// a client sends; say so at start rather than 401 every request.
		return nil, errors.New("httpapi: Deps.Token must not contain whitespace")
	}
	if len(token) < minTokenLen {
		log.WithField("min_length", minTokenLen).Warn("httpapi: the API token is short")
	}
	return &bearerAuth{sum: sha256.Sum256([]byte(token)), log: log}, nil
}

// check returns nil for a request with the right token, else the 401 to
// send.
func (b *bearerAuth) check(r *http.Request) *apiError {
	if len(r.Header.Values("Authorization")) > 1 {
		// Which one counts would differ from one reader (a proxy, a
		// log) to the next: refuse the ambiguity instead of picking.
		return newError(http.StatusBadRequest, httpjson.CodeInvalidValue, "Authorization", "two Authorization headers: send one")
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return newError(http.StatusUnauthorized, CodeUnauthorized, "", "missing bearer token (Authorization: Bearer <token>)")
	}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return newError(http.StatusUnauthorized, CodeUnauthorized, "", "want Authorization: Bearer <token>")
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], b.sum[:]) != 1 {
		return newError(http.StatusUnauthorized, CodeUnauthorized, "", "invalid bearer token")
	}
	return nil
}

// authenticate lets through requests with the right token (all of them when
// auth is off) and answers the others 401 with the WWW-Authenticate
// challenge RFC 6750 asks for. The token itself is never logged.
func (a *api) authenticate(next http.Handler) http.Handler {
	if a.auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := a.auth.check(r)
		if e == nil {
			next.ServeHTTP(w, withTokenActor(r))
			return
		}
		challenge := `Bearer realm="delayq"`
		if r.Header.Get("Authorization") != "" {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		a.log.WithFields(logrus.Fields{
			"method": r.Method,
			"path":   r.URL.Path,
			"remote": r.RemoteAddr,
		}).Warn("httpapi: request refused: " + e.Message)
		writeError(w, r, e)
	})
}
