package injector

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// mutate answers one AdmissionReview. Transport problems get a 4xx; every
// admission decision, including a denial, is a 200 with a review body.
func (s *Server) mutate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := readBody(w, r)
	if err != nil {
		// Only a body over the limit is 413; a short or badly chunked one is
		// the client's malformed request, said as it is.
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.refuse(w, http.StatusRequestEntityTooLarge, "request body larger than "+strconv.Itoa(MaxReviewBytes)+" bytes")
		} else {
			s.refuse(w, http.StatusBadRequest, "request body unreadable: "+err.Error())
		}
		return
	}
	cat := s.catalog.Current()
	var req inject.LiteRequest
	var report *inject.Report
	if lite, ok := decodeLite(r.Header.Get("Content-Type"), body); ok {
		// A pod CREATE, nearly every review: decoded in one pass.
		req, report = *lite, inject.ReviewLite(lite, cat)
	} else {
		review, err := DecodeReview(r.Header.Get("Content-Type"), body)
		if err != nil {
			re, _ := asRequestError(err)
			s.refuse(w, re.code, re.msg)
			return
		}
		full := review.Request
		report = inject.Review(full, cat, s.trusted)
		req = inject.LiteRequest{UID: full.UID, Name: full.Name, Namespace: full.Namespace, Operation: full.Operation, DryRun: full.DryRun}
	}
	resp := respond(req.UID, report)
	dryRun := req.DryRun != nil && *req.DryRun
	out, err := encodeResponse(resp)
	if err != nil {
		s.refuse(w, http.StatusInternalServerError, "cannot encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)

	s.metrics.observe(report, namespaceLabel(cat, req.Namespace), dryRun)
	s.metrics.duration.Observe(time.Since(start).Seconds())
	fields := []zap.Field{
		zap.String("uid", string(req.UID)),
		zap.String("namespace", req.Namespace),
		zap.String("name", req.Name),
		zap.String("operation", string(req.Operation)),
		zap.Bool("dryRun", dryRun),
		zap.String("decision", string(report.Decision)),
		zap.Any("reasons", report.Reasons),
		zap.Strings("plugins", report.Plugins),
		zap.Duration("took", time.Since(start)),
	}
	if cat != nil {
		fields = append(fields, zap.String("catalogRevision", cat.Revision))
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

// readBody reads the request body, at most MaxReviewBytes, into one buffer
// of the announced length (io.ReadAll doubles its way up to a large pod's
// review, twice its size in garbage).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, MaxReviewBytes)
	if n := r.ContentLength; n > 0 && n <= MaxReviewBytes {
		var buf bytes.Buffer
		buf.Grow(int(n) + bytes.MinRead)
		_, err := buf.ReadFrom(body)
		return buf.Bytes(), err
	}
	return io.ReadAll(body)
}

func (s *Server) refuse(w http.ResponseWriter, code int, msg string) {
	s.metrics.badRequests.WithLabelValues(strconv.Itoa(code)).Inc()
	s.log.Warn("refused request", zap.Int("code", code), zap.String("error", msg))
	http.Error(w, msg, code)
}
