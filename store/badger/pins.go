package badger

import (
	"encoding/hex"

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
