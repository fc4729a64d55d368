package state

// containerChanges is what a State's owner tells the encoder about its
// containers between two saves, so that a save visits the containers that
// changed instead of comparing every one with its cached entry (at 1,000
// running that walk was a quarter of each state write's CPU; issue 45).
// Only a State that says it is tracked is encoded from the list: one whose
// Containers map is written directly (Load, migrations, tests) is compared
// entry by entry, as before.
type containerChanges struct {
	// tracked: every change to Containers since the last encode went
	// through SetContainer, DeleteContainer or ReplaceContainers.
	tracked bool
	// all: ReplaceContainers was called; keys says nothing then.
	all  bool
	keys map[string]struct{}
	// encodes counts the encodes of this State, by any encoder: an
	// encoder may take keys as the changes since its own last encode only
	// if no other encode forgot them in between (two stores saving one
	// State).
	encodes uint64
}

// TrackContainerChanges promises that, from now on, the containers of s
// change only through SetContainer, DeleteContainer and
// ReplaceContainers, so that a FileStore's Save may encode only what they
// touched. Its first Save after the call compares every container.
func (s *State) TrackContainerChanges() {
	s.changed = containerChanges{tracked: true, all: true, keys: map[string]struct{}{}}
}

// SetContainer sets container id's record.
func (s *State) SetContainer(id string, c ContainerState) {
	s.Containers[id] = c
	s.noteChanged(id)
}

// DeleteContainer removes container id's record.
func (s *State) DeleteContainer(id string) {
	delete(s.Containers, id)
	s.noteChanged(id)
}

// ReplaceContainers makes m the containers of s (s keeps m).
func (s *State) ReplaceContainers(m map[string]ContainerState) {
	s.Containers = m
	s.changed.all = true
	clear(s.changed.keys)
}

func (s *State) noteChanged(id string) {
	if !s.changed.tracked || s.changed.all {
		return
	}
	s.changed.keys[id] = struct{}{}
	if len(s.changed.keys) > len(s.Containers) {
		// Comparing every container costs no more than visiting these,
		// and a State no store encodes (one that keeps nothing) would
		// otherwise keep every ID it ever held.
		s.changed.all = true
		clear(s.changed.keys)
	}
}

// changedContainers is the containers touched since the last encode and
// true, or false when every container must be compared (untracked, or
// replaced).
func (s *State) changedContainers() (map[string]struct{}, bool) {
	if !s.changed.tracked || s.changed.all {
		return nil, false
	}
	return s.changed.keys, true
}

// encoded forgets the changes: an encode took them all.
func (s *State) encoded() {
	s.changed.all = false
	clear(s.changed.keys)
	if s.changed.tracked {
		s.changed.encodes++ // an untracked State is left as it was (tests compare States)
	}
}
