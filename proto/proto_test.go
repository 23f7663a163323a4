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
	if !errors.Is(err, err) || !errors.Is(err, cause) {
		t.Error("errors.Is does not reach both the error and its cause")
	}
	if errors.Unwrap(err) != cause {
		t.Errorf("Unwrap = %v, want the cause", errors.Unwrap(err))
	}
	if errors.Is(err, proto.New(proto.DCIDBinding, "")) || errors.Is(err, proto.New(proto.IDBindingFailed, "")) {
		t.Error("errors.Is matches another error by its code")
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

// Sentinels as two packages declare them: the same code, two identities.
var (
	errMalformed = proto.New(proto.BadRequest, "malformed field")
	errMismatch  = proto.New(proto.BadRequest, "mismatched field")
)

func TestErrorsSharingACodeAreDistinct(t *testing.T) {
	if errors.Is(errMalformed, errMismatch) || errors.Is(errMismatch, errMalformed) {
		t.Error("two sentinels with one code match each other")
	}
	c := errMalformed.With("field %s is not valid UTF-8", "nonce")
	if errors.Is(c, errMismatch) {
		t.Error("a case of one sentinel matches another sentinel of its code")
	}
	if errors.Is(errMalformed, c) {
		t.Error("a sentinel matches its own case")
	}
	if errors.Is(c, errMalformed.With("another case")) {
		t.Error("two cases of one sentinel match each other")
	}
	if errors.Is(proto.New(proto.Internal, "x"), proto.New(proto.Internal, "x")) {
		t.Error("two one-off errors with one code and text match each other")
	}
}

func TestWrappedCaseMatchesItsSentinel(t *testing.T) {
	c := errMalformed.With("field %s is not valid UTF-8", "nonce")
	wrapped := fmt.Errorf("reading the request: %w", c)
	if !errors.Is(wrapped, errMalformed) || !errors.Is(wrapped, c) {
		t.Error("a wrapped case does not match its sentinel and itself")
	}
	if !errors.Is(fmt.Errorf("again: %w", errMalformed), errMalformed) {
		t.Error("a wrapped sentinel does not match itself")
	}
	if proto.CodeOf(wrapped) != proto.BadRequest || proto.Text(wrapped) != "field nonce is not valid UTF-8" {
		t.Errorf("code %s, text %q: want the case's", proto.CodeOf(wrapped), proto.Text(wrapped))
	}
	deeper := errMalformed.With("a case").With("a case of the case")
	if !errors.Is(deeper, errMalformed) || proto.CodeOf(deeper) != proto.BadRequest {
		t.Error("a case of a case does not match the first sentinel")
	}
	read := errMalformed.With("body: %w", io.ErrUnexpectedEOF)
	if !errors.Is(read, errMalformed) || !errors.Is(read, io.ErrUnexpectedEOF) || errors.Unwrap(read) != io.ErrUnexpectedEOF {
		t.Error("a case made with %w loses its sentinel or its cause")
	}
}
