package canonical

// Domain suffixes of the messages of docs/protocol.md §10 that undo things.
const (
	RevocationDomain = "-credential-revocation:v1"
	UnbindDomain     = "-binding-unbind:v1"
)

// Revocation is message 11, signed by the operator's root key: the credentials of this
// operator that carry this revocation_id are revoked from revoked_at on.
type Revocation struct {
	OperatorDID           string `json:"operator_did"`
	OperatorRootPublicKey string `json:"operator_root_public_key"` // exactly as given, as in message 2
	RevocationID          string `json:"revocation_id"`
	RevokedAt             string `json:"revoked_at"`
}

// Bytes implements [Message].
func (m Revocation) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, RevocationDomain, &m)
}

// Unbind is message 12, signed by the node key to end the active binding that one of its
// binding sessions created.
type Unbind struct {
	BindingSessionID string `json:"binding_session_id"`
	NodeDID          string `json:"node_did"`
	TS               int64  `json:"ts"`
}

// Signer returns the DID of the node that signs the message, and its ts.
func (m Unbind) Signer() (did string, ts int64) { return m.NodeDID, m.TS }

// Bytes implements [Message].
func (m Unbind) Bytes(prefix string) ([]byte, error) {
	return encode(prefix, UnbindDomain, &m)
}
