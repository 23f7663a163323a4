package badger

import (
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/svrp/svrp/store"
)

// revocationKey hex-encodes both parts: a revocation_id may hold '/', and the store does not
// rely on the registry having checked the DID.
func revocationKey(operatorDID, revocationID string) []byte {
	return key(pRevoked, hex.EncodeToString([]byte(operatorDID)), hex.EncodeToString([]byte(revocationID)))
}

func (t *badgerTx) Revocation(operatorDID, revocationID string) (store.Revocation, error) {
	if err := t.Readable(); err != nil {
		return store.Revocation{}, err
	}
	var r store.Revocation
	err := t.get(revocationKey(operatorDID, revocationID), &r)
	return r, err
}

func (t *badgerTx) PutRevocation(r store.Revocation) error {
	if err := t.Writable(); err != nil {
		return err
	}
	k := revocationKey(r.OperatorDID, r.RevocationID)
	if _, err := t.getRaw(k); errors.Is(err, store.ErrNotFound) {
		n, err := t.RevocationCount()
		if err != nil {
			return err
		}
		if err := t.setRaw([]byte(kRevokedCount), strconv.AppendInt(nil, int64(n)+1, 10)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return t.put(k, r)
}

func (t *badgerTx) RevocationCount() (int, error) {
	if err := t.Readable(); err != nil {
		return 0, err
	}
	raw, err := t.getRaw([]byte(kRevokedCount))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return 0, errors.New("store: corrupt revocation count")
	}
	return n, nil
}
