package store

func (t *memTx) OperatorPin(body string) (OperatorPin, error) {
	if err := t.Readable(); err != nil {
		return OperatorPin{}, err
	}
	p, ok := t.d.pins[body]
	if !ok {
		return OperatorPin{}, ErrNotFound
	}
	return p, nil
}

func (t *memTx) PutOperatorPin(p OperatorPin) error {
	if err := t.Writable(); err != nil {
		return err
	}
	mapSet(&t.undo, t.d.pins, p.Body, p)
	return nil
}
