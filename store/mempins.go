package store

import "strings"

func (t *memTx) OperatorPin(body string) (OperatorPin, error) {
	return get(t, t.d.pins, body, nil)
}

func (t *memTx) PutOperatorPin(p OperatorPin) error {
	if err := t.Writable(); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.pins, p.Body, p)
	return nil
}

func (t *memTx) EachOperatorPin(fn func(OperatorPin) error) error {
	return each(t, t.d.pins, strings.Compare, func(_ string, p OperatorPin) error { return fn(p) })
}

func (t *memTx) DeleteRevocation(operatorDID, revocationID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	mapDelete(&t.undo, t.d.revoked, [2]string{operatorDID, revocationID})
	return nil
}
