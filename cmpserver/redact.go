package cmpserver

import (
	"context"

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
