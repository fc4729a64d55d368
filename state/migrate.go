package state

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// migrations turn the state of an older schema version into the current
// one, by version. Each reads its version strictly (unknown fields are an
// error), as the current decoder does, so a damaged file is moved aside
// rather than half understood.
var migrations = map[int]func(payload []byte) (*State, error){
	1: migrateV1,
	2: migrateV2,
	3: migrateV2,
	4: migrateV2,
	5: migrateV2,
	6: migrateV2,
	7: migrateV2,
}

// migrateV2: schemas 3 to 8 only added optional fields (isolateIRQs,
// isolatedPartition; powerClass, powerClasses; memory; rule, ruleDetail,
// deviceNUMA, fromHold, refusals; otherContainerKeys; hideHyperthreads),
// so a version 2 to 7 payload is a current one without them. Containers without memory get it again from
// the runtime at Synchronize; holds without it hold no memory until their
// pod ends; records without a rule keep none (explain says the release
// that placed them did not record it), and no refusal is remembered.
func migrateV2(payload []byte) (*State, error) {
	return decodePayload(payload)
}

// stateV1 is schema 1, the first release's file (2a6c3c2).
type stateV1 struct {
	Containers map[string]containerV1 `json:"containers"`
	Previous   map[string]string      `json:"previous,omitempty"`
	Pools      map[string]string      `json:"pools,omitempty"`
}

type containerV1 struct {
	PodUID       string `json:"podUID"`
	PodNamespace string `json:"podNamespace"`
	PodName      string `json:"podName"`
	Container    string `json:"container"`
	Pool         string `json:"pool"`
	MilliCPU     int64  `json:"milliCPU"`
	CPUs         string `json:"cpus"`
	Reserved     string `json:"reserved,omitempty"`
	Mems         string `json:"mems"`
}

// migrateV1: containers keep every field; the CPUs remembered for stopped
// containers (previous) are kept in State.Previous, which Synchronize turns
// into holds for the pods that still exist (see the plugin's
// migratePrevious), since
// only the runtime knows which pods do.
func migrateV1(payload []byte) (*State, error) {
	var old stateV1
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&old); err != nil {
		return nil, fmt.Errorf("state content: %w", err)
	}
	st := NewState()
	for id, c := range old.Containers {
		st.Containers[id] = ContainerState{PodUID: c.PodUID, PodNamespace: c.PodNamespace, PodName: c.PodName,
			Container: c.Container, Pool: c.Pool, MilliCPU: c.MilliCPU, CPUs: c.CPUs, Reserved: c.Reserved, Mems: c.Mems}
	}
	for k, v := range old.Previous {
		st.Previous[k] = v
	}
	for k, v := range old.Pools {
		st.Pools[k] = v
	}
	return st, nil
}
