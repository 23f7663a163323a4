package proto_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/svrp/svrp/proto"
)

func TestErrorfKeepsItsCause(t *testing.T) {
	cause := proto.New(proto.IDBindingFailed, `"did:svrp:o:1" breaks the did:svrp grammar`)
	err := proto.Errorf(proto.DCIDBinding, "device credential: %w", cause)
	if got, want := err.Error(), `device credential: "did:svrp:o:1" breaks the did:svrp grammar`; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if proto.CodeOf(err) != proto.DCIDBinding {
		t.Errorf("code %s, want the outer DC_ID_BINDING", proto.CodeOf(err))
	}
	if !errors.Is(err, proto.New(proto.DCIDBinding, "")) || !errors.Is(err, proto.New(proto.IDBindingFailed, "")) {
		t.Error("errors.Is does not reach both the error's code and its cause's")
	}
	if errors.Unwrap(err) != cause {
		t.Errorf("Unwrap = %v, want the cause", errors.Unwrap(err))
	}
	if errors.Is(err, proto.New(proto.BadRequest, "")) {
		t.Error("errors.Is matches a code neither carries")
	}
	if e := proto.Errorf(proto.Internal, "reading: %w and %w", io.EOF, io.ErrUnexpectedEOF); !errors.Is(e, io.EOF) || !errors.Is(e, io.ErrUnexpectedEOF) {
		t.Error("two %w operands: a cause is lost")
	}
	if errors.Unwrap(proto.New(proto.NotFound, "x")) != nil {
		t.Error("an error made by New has a cause")
	}
}

func TestText(t *testing.T) {
	coded := proto.New(proto.NoSession, "no bearer token sent")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{coded, "no bearer token sent"},
		{fmt.Errorf("checking the operator's session: %w", coded), "no bearer token sent"},
		{proto.Errorf(proto.DCExpired, "issued_at: %w", proto.New(proto.BadRequest, "not RFC 3339")), "issued_at: not RFC 3339"},
		{fmt.Errorf("store: %w", io.EOF), ""},
	} {
		if got := proto.Text(tc.err); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
