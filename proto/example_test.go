package proto_test

import (
	"errors"
	"fmt"

	"github.com/svrp/svrp/proto"
)

// A package declares a sentinel and returns cases of it that say what exactly was wrong.
// errors.Is finds the sentinel through any wrapping; another error with the same code is not
// the sentinel, and CodeOf answers the code either way.
func ExampleError_With() {
	errBadField := proto.New(proto.BadRequest, "malformed field")
	err := fmt.Errorf("reading the request: %w", errBadField.With("field %s is not valid UTF-8", "nonce"))
	fmt.Println(errors.Is(err, errBadField), proto.CodeOf(err), proto.Text(err))

	other := proto.New(proto.BadRequest, "malformed field")
	fmt.Println(errors.Is(err, other), proto.CodeOf(other))
	// Output:
	// true BAD_REQUEST field nonce is not valid UTF-8
	// false BAD_REQUEST
}
