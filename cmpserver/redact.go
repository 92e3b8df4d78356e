package cmpserver

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
)

// Errors a request returns go to Argo CD, which shows them in the
// Application's conditions to everyone who may read it. These interceptors
// replace the sidecar's Secret values in them (cmpserver/redact) whatever
// stage wrote the text: a command's stderr is redacted as it is read
// (command.Options.Redact), but a message may also quote a command's stdout
// (a dynamic parameters command that printed its env and no JSON) or a path.
// The gRPC code is kept.

func redactUnary(r *redact.Redactor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		return resp, r.Error(err)
	}
}

func redactStream(r *redact.Redactor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return r.Error(handler(srv, ss))
	}
}

// registerRedactions adds cmp_server_redactions_total: the values replaced
// in commands' stderr and in the errors sent, so that a plugin whose tools
// print their credentials is seen on a dashboard, not only in a log.
func registerRedactions(reg *prometheus.Registry, r *redact.Redactor) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cmp_server_redactions_total",
		Help: "Secret values replaced with [redacted NAME] in commands' stderr and in errors sent to the repo-server.",
	}, func() float64 { return float64(r.Count()) }))
}
