package injector

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// mutate answers one AdmissionReview. Transport problems get a 4xx; every
// admission decision, including a denial, is a 200 with a review body.
func (s *Server) mutate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	buf := getBuffer()
	defer putBuffer(buf)
	body, err := readBody(w, r, buf)
	if err != nil {
		// Only a body over the limit is 413; a short or badly chunked one is
		// the client's malformed request, said as it is.
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.refuse(w, http.StatusRequestEntityTooLarge, "request body larger than "+strconv.Itoa(maxReviewBytes)+" bytes")
		} else {
			s.refuse(w, http.StatusBadRequest, "request body unreadable: "+err.Error())
		}
		return
	}
	// One pass over the body, whatever the operation (review.go).
	req, err := decodeReview(r.Header.Get("Content-Type"), body)
	if err != nil {
		// Every refusal of decodeReview is a requestError; anything else
		// is still the request's fault, never a panic.
		if re, ok := asRequestError(err); ok {
			s.refuse(w, re.code, re.msg)
		} else {
			s.refuse(w, http.StatusBadRequest, err.Error())
		}
		return
	}
	// Only now is this the API server's kind of connection: kept past the
	// probation and never evicted. Any request to /mutate used to keep it,
	// and 4 addresses × 256 connections sending POST /mutate {} once a
	// minute held every slot, so every pod create failed. A body that is
	// empty, malformed, not a v1 AdmissionReview or without a request UID
	// (all refused above) leaves the connection as evictable as one that
	// sent nothing. A pod can still forge a valid review: once answered, its
	// connection is evictable again (the idlest kept one goes first), so
	// forged reviews cannot hold the slots the API server needs.
	defer serving.KeepConn(r.Context())()
	cat := s.catalog.Current()
	report := req.decide(cat, s.encodings, s.trusted)
	resp := respond(req.UID, report)
	dryRun := req.DryRun != nil && *req.DryRun
	out := getBuffer()
	if err := encodeResponse(out, resp); err != nil {
		s.refuse(w, http.StatusInternalServerError, "cannot encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out.Bytes()); err == nil {
		// Write returns once the bytes are copied or sent; after an error
		// (a stream reset under HTTP/2) a frame may still hold them.
		putBuffer(out)
	}

	s.metrics.observe(report, namespaceLabel(cat, req.Namespace), dryRun)
	s.metrics.duration.Observe(time.Since(start).Seconds())
	fields := []zap.Field{
		zap.String("uid", string(req.UID)),
		zap.String("namespace", req.Namespace),
		zap.String("name", req.Name),
		zap.String("operation", string(req.Operation)),
		zap.Bool("dryRun", dryRun),
		zap.String("decision", string(report.Decision)),
		zap.Array("reasons", reasons(report.Reasons)),
		zap.Strings("plugins", report.Plugins),
		zap.Duration("took", time.Since(start)),
		// kube-apiserver calls a Service's webhook over HTTP/1.1 and only a
		// localhost URL's over HTTP/2 (docs/performance.md).
		zap.String("proto", r.Proto),
	}
	if cat != nil {
		fields = append(fields, zap.String("catalogRevision", cat.Revision))
	}
	if report.Server != nil {
		// Where the sidecars take the plugin server from (the copy or their images).
		fields = append(fields, zap.String("server", string(report.Server.Source)))
	}
	switch report.Decision {
	case inject.Denied:
		s.log.Warn(resp.Result.Message, fields...)
	case inject.Injected:
		s.log.Info("injected", fields...)
	default:
		s.log.Debug("skipped", fields...)
	}
}

// readBody reads the request body, at most maxReviewBytes (the only size
// check), into buf, grown once to the announced length (io.ReadAll doubles its way up to a large
// pod's review, twice its size in garbage). Nothing keeps the body after the
// review: the decoder copies what it keeps.
func readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, maxReviewBytes)
	if n := r.ContentLength; n > 0 && n <= maxReviewBytes {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(body)
	return buf.Bytes(), err
}

// Request bodies and responses are a few KiB per review, the larger part of
// what a review allocates; reusing them keeps the collector's work down.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled keeps a rare large pod's buffer from staying in the pool.
const maxPooled = 64 << 10

func getBuffer() *bytes.Buffer { return buffers.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooled {
		return
	}
	b.Reset()
	buffers.Put(b)
}

// reasons logs reason codes as a string array; zap.Any would encode them
// through reflection on every review.
type reasons []inject.Reason

func (rs reasons) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, r := range rs {
		enc.AppendString(string(r))
	}
	return nil
}

func (s *Server) refuse(w http.ResponseWriter, code int, msg string) {
	s.metrics.badRequests.WithLabelValues(strconv.Itoa(code)).Inc()
	s.log.Warn("refused request", zap.Int("code", code), zap.String("error", msg))
	http.Error(w, msg, code)
}
