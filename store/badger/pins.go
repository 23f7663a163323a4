package badger

import (
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/svrp/svrp/store"
)

// pPin holds the operator pins, keyed by the hex of the DID body so that the store does not
// rely on the registry having checked it.
const pPin = "p/"

func (t *badgerTx) OperatorPin(body string) (store.OperatorPin, error) {
	if err := t.Readable(); err != nil {
		return store.OperatorPin{}, err
	}
	var p store.OperatorPin
	err := t.get(key(pPin, hex.EncodeToString([]byte(body))), &p)
	return p, err
}

func (t *badgerTx) PutOperatorPin(p store.OperatorPin) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.put(key(pPin, hex.EncodeToString([]byte(p.Body))), p)
}

func (t *badgerTx) EachOperatorPin(fn func(store.OperatorPin) error) error {
	return eachValue(t, pPin, fn)
}

func (t *badgerTx) DeleteRevocation(operatorDID, revocationID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	k := revocationKey(operatorDID, revocationID)
	if _, err := t.getRaw(k); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	n, err := t.RevocationCount()
	if err != nil {
		return err
	}
	if err := t.setRaw([]byte(kRevokedCount), strconv.AppendInt(nil, int64(max(n-1, 0)), 10)); err != nil {
		return err
	}
	return t.del(k)
}
