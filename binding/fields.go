package binding

import (
	"fmt"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
)

// Shape checks shared by the three signed binding messages. Each returns a BAD_REQUEST error
// naming the field. Signed strings go through canonical's injectivity rules here, before any
// signature is checked, so that a refusal never depends on which signature check runs first.

// checkSessionID applies the binding_session_id limit: 1–128 characters of [A-Za-z0-9._-].
func checkSessionID(field, id string) error {
	if id == "" || len(id) > MaxSessionIDLen {
		return badRequest(fmt.Sprintf("field %s must be 1-%d characters", field, MaxSessionIDLen))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return badRequest(fmt.Sprintf("field %s has a character outside [A-Za-z0-9._-]", field))
		}
	}
	return nil
}

// checkText applies the 1–256 byte limit to a text field. The Go structs cannot tell an absent
// optional field from an empty one, so "" stands for absent: it passes when the field is
// optional (the registry refuses a present empty string from the JSON) and fails when it is
// required.
func checkText(field, s string, required bool) error {
	if s == "" {
		if required {
			return badRequest(fmt.Sprintf("field %s is required and must be 1-%d bytes", field, MaxTextLen))
		}
		return nil
	}
	if len(s) > MaxTextLen {
		return badRequest(fmt.Sprintf("field %s is %d bytes, at most %d", field, len(s), MaxTextLen))
	}
	return canonical.CheckString(field, s)
}

// checkTerms checks the terms a message carries, task types and the two limits, under their
// field names with prefix: "requested_" in the node's description, "" in an authorization.
func checkTerms(prefix string, taskTypes []string, single, daily *float64) error {
	if err := checkTaskTypes(prefix+"task_types", taskTypes); err != nil {
		return err
	}
	if err := checkLimit(prefix+"single_limit", single); err != nil {
		return err
	}
	return checkLimit(prefix+"daily_limit", daily)
}

// checkTaskTypes applies the list limits (at most 64 items of 1–64 bytes) and the list
// injectivity rule.
func checkTaskTypes(field string, items []string) error {
	if len(items) > MaxListItems {
		return badRequest(fmt.Sprintf("field %s has %d items, at most %d", field, len(items), MaxListItems))
	}
	for _, it := range items {
		if len(it) > MaxListItemLen {
			return badRequest(fmt.Sprintf("field %s has an item of %d bytes, at most %d", field, len(it), MaxListItemLen))
		}
	}
	return canonical.CheckList(field, items)
}

// checkLimit applies the number rule to a limit; nil is null and always passes.
func checkLimit(field string, v *float64) error {
	if v == nil {
		return nil
	}
	return canonical.CheckNumber(field, *v)
}

// parseTime reads a timestamp field, naming the field in the error.
func parseTime(field, s string) (time.Time, error) {
	t, err := canonical.ParseTime(s)
	if err != nil {
		return time.Time{}, badRequest(fmt.Sprintf("field %s: %v", field, err))
	}
	return t, nil
}

// checkStrings applies the injectivity rule to plain signed strings, in order.
func checkStrings(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if err := canonical.CheckString(fields[i], fields[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// nodeDIDBinds reports whether did is a node DID (any spelling, not operator-tagged) that binds
// to key.
func nodeDIDBinds(did string, key didkey.PublicKey) bool {
	d, err := didkey.Parse(did)
	return err == nil && !d.IsOperator() && d.Matches(key)
}
