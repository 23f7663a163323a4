package daemon

import (
	"strconv"

	"github.com/svrp/svrp/sigverify"
)

// batchVerifyUsage is the help of --batch-verify.
const batchVerifyUsage = "check Ed25519 signatures that arrive together in batches while others are being checked (--batch-verify=false checks each alone; the answers are the same)"

// newVerifier returns the registry's signature verifier, a sigverify.Batcher unless
// c.SingleVerify, and what stops it.
func newVerifier(c Config) (sigverify.Verifier, func()) {
	if c.SingleVerify {
		return sigverify.Single{}, func() {}
	}
	b := sigverify.NewBatcher()
	return b, b.Close
}

// notFlag is a boolean flag that sets *p to its negation, so that a Config field whose zero
// value is the default can stand behind a flag that defaults to true.
type notFlag struct{ p *bool }

// String is "false" for the zero notFlag, which the flag package asks to tell a default
// worth printing.
func (f notFlag) String() string {
	if f.p == nil {
		return "false"
	}
	return strconv.FormatBool(!*f.p)
}

func (f notFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err == nil {
		*f.p = !v
	}
	return err
}

func (f notFlag) IsBoolFlag() bool { return true }
