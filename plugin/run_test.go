package plugin

import (
	"context"
	"reflect"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/assert"
)

// stopOnly handles one event.
type stopOnly struct{}

func (stopOnly) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}

// TestSubscribedEventsAreTheHandledOnes: the subscription follows the
// handlers the plugin implements, as the NRI stub's own does.
func TestSubscribedEventsAreTheHandledOnes(t *testing.T) {
	assert.Equal(t, api.MustParseEventMask("RunPodSandbox,StopPodSandbox,RemovePodSandbox,CreateContainer,PostStartContainer,UpdateContainer,StopContainer,RemoveContainer"),
		subscribed, "the events handled today: %s", subscribed.PrettyString())
	assert.Equal(t, api.MustParseEventMask("StopContainer"), handledEvents(stopOnly{}))
	assert.Equal(t, api.EventMask(0), handledEvents(struct{}{}))
}

// TestEveryStubHandlerHasItsEvent: each handler interface the stub knows,
// but for the three that are not events, is in eventHandlers.
func TestEveryStubHandlerHasItsEvent(t *testing.T) {
	notEvents := map[reflect.Type]bool{
		reflect.TypeFor[stub.ConfigureInterface]():   true,
		reflect.TypeFor[stub.SynchronizeInterface](): true,
		reflect.TypeFor[stub.ShutdownInterface]():    true,
	}
	paired := map[reflect.Type]bool{}
	for _, h := range eventHandlers {
		paired[h.handler] = true
	}
	for _, iface := range stubHandlers {
		assert.Equal(t, !notEvents[iface], paired[iface], "%s", iface.Name())
	}
}
