// Package otlptest is an OTLP/gRPC trace receiver on loopback for tests: the
// collector's protocol, served with the OTLP protocol's own generated
// service, keeping every span it is sent.
package otlptest

import (
	"context"
	"encoding/hex"
	"net"
	"strconv"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Span is one received span with its service's name.
type Span struct {
	Service      string
	Name         string
	TraceID      string // hex
	SpanID       string // hex
	ParentSpanID string // hex; "" for a root
	Attributes   map[string]string
	StatusError  string // the status message of a span with an error status
}

// Receiver collects the spans exported to Addr.
type Receiver struct {
	Addr string
	srv  *grpc.Server

	mu      sync.Mutex
	spans   []Span
	headers []metadata.MD
}

// Start serves a receiver on a free loopback port until Stop.
func Start() (*Receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{Addr: l.Addr().String(), srv: grpc.NewServer()}
	collectortrace.RegisterTraceServiceServer(r.srv, &service{r: r})
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// Stop ends the receiver.
func (r *Receiver) Stop() { r.srv.Stop() }

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers are the metadata of each export call so far.
func (r *Receiver) Headers() []metadata.MD {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]metadata.MD(nil), r.headers...)
}

type service struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s *service) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				got = append(got, convert(service, sp))
			}
		}
	}
	s.r.mu.Lock()
	s.r.spans = append(s.r.spans, got...)
	s.r.headers = append(s.r.headers, md)
	s.r.mu.Unlock()
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func convert(service string, sp *tracepb.Span) Span {
	out := Span{Service: service, Name: sp.GetName(), TraceID: hex.EncodeToString(sp.GetTraceId()),
		SpanID: hex.EncodeToString(sp.GetSpanId()), ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
		Attributes: attrs(sp.GetAttributes())}
	if sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		out.StatusError = sp.GetStatus().GetMessage()
	}
	return out
}

// attrs are attributes as strings (what the tests compare).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(x.BoolValue)
		default:
			// Ints, bools and the rest in the protocol's text form.
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}
