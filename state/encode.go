package state

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// stateEncoder produces exactly json.Marshal(st), but re-encodes only the
// containers and holds that changed since the last call and keeps their
// order, and reuses its buffer: reflection, sorting and allocation over a
// thousand unchanged entries would dominate each write (issue 45). What is
// left per unchanged entry is a map lookup and a comparison (and the copy
// into the buffer); for the containers of a tracked State
// (State.TrackContainerChanges, the state writer's mirror) not even that,
// only the copy.
type stateEncoder struct {
	containers entryCache[ContainerState]
	held       entryCache[HeldState]
	buf        []byte // the payload, reused: valid until the next encode
	// from is the State the cache was last brought up to; nil after a
	// failed encode. Only its tracked changes since then may be encoded
	// alone (State.TrackContainerChanges).
	from *State
	// fromEncode is from's count of encodes after this encoder's
	// (containerChanges.encodes): another encoder's encode of from since
	// then took its changes.
	fromEncode uint64
}

// entryCache is one map of the state as json.Marshal writes it: its
// entries `"key":{...}` encoded once, kept in key order (a slice, so that
// concatenating them looks nothing up).
type entryCache[V any] struct {
	byKey map[string]*cachedEntry[V]
	order []*cachedEntry[V]
}

type cachedEntry[V any] struct {
	key   string
	value V
	entry []byte // `"key":{...}`
}

// update brings the cache to m, encoding the entries that are new or whose
// value is not equal to the cached one. own, if not nil, returns a copy of
// a value that shares nothing with it: the cache keeps that copy, so that
// a change made in place to what the state points to is still a change.
func (c *entryCache[V]) update(m map[string]V, equal func(a, b V) bool, own func(V) V) error {
	if c.byKey == nil {
		c.byKey = map[string]*cachedEntry[V]{}
	}
	for key, v := range m {
		if err := c.put(key, v, equal, own); err != nil {
			return err
		}
	}
	// Every key of m is in the cache now: it holds others only if it is
	// larger.
	if len(c.byKey) > len(m) {
		for key := range c.byKey {
			if _, ok := m[key]; !ok {
				c.remove(key)
			}
		}
	}
	return nil
}

// updateKeys brings the cache to m where only the entries of keys may
// have changed since the cache was last brought to m: the others are not
// visited.
func (c *entryCache[V]) updateKeys(m map[string]V, keys map[string]struct{}, equal func(a, b V) bool, own func(V) V) error {
	for key := range keys {
		v, ok := m[key]
		if !ok {
			if _, cached := c.byKey[key]; cached {
				c.remove(key)
			}
			continue
		}
		if err := c.put(key, v, equal, own); err != nil {
			return err
		}
	}
	return nil
}

// put caches key's entry, encoding it unless the cached value equals v.
func (c *entryCache[V]) put(key string, v V, equal func(a, b V) bool, own func(V) V) error {
	cached, ok := c.byKey[key]
	if ok && equal(cached.value, v) {
		return nil
	}
	k, err := json.Marshal(key)
	if err != nil {
		return err
	}
	val, err := json.Marshal(v)
	if err != nil {
		return err
	}
	entry := append(append(k, ':'), val...)
	if own != nil {
		v = own(v)
	}
	if ok {
		cached.value, cached.entry = v, entry
		return nil
	}
	cached = &cachedEntry[V]{key: key, value: v, entry: entry}
	c.byKey[key] = cached
	c.order = slices.Insert(c.order, c.position(key), cached)
	return nil
}

// remove drops key's entry, which the cache holds.
func (c *entryCache[V]) remove(key string) {
	delete(c.byKey, key)
	i := c.position(key)
	c.order = slices.Delete(c.order, i, i+1)
}

// position is where key is, or goes, in order.
func (c *entryCache[V]) position(key string) int {
	i, _ := slices.BinarySearchFunc(c.order, key, func(e *cachedEntry[V], key string) int { return strings.Compare(e.key, key) })
	return i
}

// writeTo appends the map as json.Marshal writes it: `{...}`.
func (c *entryCache[V]) writeTo(buf *bytes.Buffer) {
	buf.WriteByte('{')
	for i, e := range c.order {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(e.entry)
	}
	buf.WriteByte('}')
}

// sameHold compares holds by value: the exit code is a pointer, a new one
// at each collect (ownHold keeps the cache's own).
// Every other field is compared with ==, so that a field added to
// HeldState is compared without being named here.
func sameHold(a, b HeldState) bool {
	codeA, codeB := a.ExitCode, b.ExitCode
	a.ExitCode, b.ExitCode = nil, nil
	if a != b || (codeA == nil) != (codeB == nil) {
		return false
	}
	return codeA == nil || *codeA == *codeB
}

// ownHold is h with an exit code of its own: the state shares its pointer
// with the allocator's hold, and the cache must not see a change made
// through it as no change.
func ownHold(h HeldState) HeldState {
	if h.ExitCode != nil {
		code := *h.ExitCode
		h.ExitCode = &code
	}
	return h
}

func (e *stateEncoder) encode(st *State) ([]byte, error) {
	sameContainer := func(a, b ContainerState) bool { return a == b }
	var err error
	if keys, ok := st.changedContainers(); ok && e.from == st && e.fromEncode == st.changed.encodes && e.containers.byKey != nil {
		err = e.containers.updateKeys(st.Containers, keys, sameContainer, nil)
	} else {
		err = e.containers.update(st.Containers, sameContainer, nil)
	}
	if err != nil {
		e.from = nil // compare every container next time
		return nil, err
	}
	e.from = st
	st.encoded()
	e.fromEncode = st.changed.encodes
	if err := e.held.update(st.Held, sameHold, ownHold); err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(e.buf[:0])
	buf.WriteString(`{"containers":`)
	if st.Containers == nil {
		buf.WriteString("null") // as json.Marshal writes a nil map
	} else {
		e.containers.writeTo(buf)
	}
	if len(st.Held) > 0 {
		buf.WriteString(`,"held":`)
		e.held.writeTo(buf)
	}
	// The rest, each omitempty, in the struct's order.
	for _, f := range []struct {
		key   string
		val   any
		empty bool
	}{{"previous", st.Previous, len(st.Previous) == 0}, {"pools", st.Pools, len(st.Pools) == 0},
		{"powerClasses", st.PowerClasses, len(st.PowerClasses) == 0}, {"numaMemory", st.NUMAMemory, len(st.NUMAMemory) == 0},
		{"refusals", st.Refusals, len(st.Refusals) == 0}} {
		if f.empty {
			continue
		}
		b, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		buf.WriteString(`,"` + f.key + `":`)
		buf.Write(b)
	}
	buf.WriteByte('}')
	e.buf = buf.Bytes()
	return e.buf, nil
}
