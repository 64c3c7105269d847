package server

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
)

// toStatus is the one place that maps errors to gRPC status codes. Messages
// of expected errors go to the client as they are (they name the field and
// the limit, or say "not found" the same way whether a card does not exist or
// is not the caller's to see); anything unexpected is logged and answered
// with a generic Internal error.
func toStatus(log *slog.Logger, method string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, cards.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, cards.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, cards.ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, cards.ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	log.Error("internal error", "method", method, "err", err)
	return status.Error(codes.Internal, "internal error")
}
