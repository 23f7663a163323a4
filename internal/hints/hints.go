// Package hints says, for each protocol code, what the person can do next. The CLI prints the
// hint under an error; the console in the browser shows the same text beside the code, so an
// operator reads the same advice in both.
package hints

import (
	"strings"

	"github.com/svrp/svrp/proto"
)

// text holds the hints; {dir} and {registry} stand for the command's --dir and --registry.
var text = map[proto.Code]string{
	proto.TransportError:    "is a registry running at {registry}? start one with: svrpd serve (or set --registry / SVRPD_REGISTRY)",
	proto.NoSession:         "run: svrpd operator login --dir {dir}",
	proto.SessionExpired:    "sessions last one hour; run: svrpd operator login --dir {dir}",
	proto.NotFound:          "check the code and the node DID on the node's screen: a code works once, for at most 10 minutes, and only with the DID of the node that shows it; if it expired, run svrpd node bind again",
	proto.RateLimited:       "too many attempts; wait up to 10 minutes and try again",
	proto.DIDCollision:      "another key holds this short DID; run again with --did-form fallback",
	proto.BadSignature:      "is --prefix the registry's (default service)? the key file may also not match what the registry has",
	proto.StaleTS:           "this machine's clock is more than 5 minutes off the registry's; fix the clock",
	proto.UnknownDID:        "the registry does not know this node; run: svrpd node run --key FILE --endpoint HOST:PORT",
	proto.BadState:          "the binding session has moved on (expired, rejected or cancelled); start again with: svrpd node bind",
	proto.AlreadyActive:     "the binding is already active: nothing to do",
	proto.PermissionDenied:  "only the operator that resolved the session may do this, with a credential that grants nodes.bind",
	proto.ScopeExceeded:     "grant no more than the node asked for: see svrpd operator resolve",
	proto.DCIDBinding:       "{dir}/credential.json does not belong to its root key; run svrpd operator init again",
	proto.DCBadSignature:    "{dir}/credential.json was altered, or was signed for another --prefix",
	proto.DCExpired:         "the device credential is outside its validity (or this clock is wrong); issue a new one with svrpd operator init",
	proto.AuthzExpired:      "the authorization is outside its validity; check this machine's clock",
	proto.DCRevoked:         "this device credential was revoked with the root key; get a new one: svrpd operator init --dir NEWDIR --root ROOT.SEED",
	proto.AuthzRevoked:      "the operator revoked this authorization's revocation_id; authorize again with a new one",
	proto.BadChallenge:      "the login challenge was used or expired; run the login again",
	proto.IDBindingFailed:   "the DID does not derive from the key; check the key file",
	proto.IDBindingRequired: "only did:svrp identities are accepted",
	proto.TTLTooLong:        "--ttl must be more than 0 and at most 600s",
	proto.AlreadyExpired:    "this machine's clock is behind the registry's; fix the clock",
	proto.SessionExists:     "that binding session id was used before; leave it out to draw a new one",
	proto.BadRequest:        "the registry refused a value; the message names it",
	proto.Internal:          "the registry failed; its log says why",
	proto.StoreUnavailable:  "the registry cannot reach its store now (a database restarting, a full disk); nothing changed; try again in a few seconds",
}

// For returns the hint for code with its placeholders filled in: dir is the operator
// directory ("DIR" when empty) and registry the registry's URL.
func For(code proto.Code, dir, registry string) (string, bool) {
	h, ok := text[code]
	if !ok {
		return "", false
	}
	if dir == "" {
		dir = "DIR"
	}
	return strings.NewReplacer("{dir}", dir, "{registry}", registry).Replace(h), true
}

// All returns the table keyed by the codes' wire names, with its placeholders unfilled.
func All() map[string]string {
	out := make(map[string]string, len(text))
	for c, h := range text {
		out[string(c)] = h
	}
	return out
}
