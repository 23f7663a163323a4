package store

import (
	"slices"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
)

// The clone functions give the memory store the isolation the Badger store gets from
// encoding: a caller that keeps or changes a slice or a pointee it passed in or got back
// cannot reach stored state. Nil stays nil and empty stays empty, as JSON keeps them.

func cloneNode(n Node) Node {
	n.Capabilities = slices.Clone(n.Capabilities)
	n.Signature = clonePtr(n.Signature)
	n.RegistrationTS = clonePtr(n.RegistrationTS)
	return n
}

func cloneSession(s binding.BindingSession) binding.BindingSession {
	s.Request.RequestedTaskTypes = slices.Clone(s.Request.RequestedTaskTypes)
	s.Request.RequestedSingleLimit = clonePtr(s.Request.RequestedSingleLimit)
	s.Request.RequestedDailyLimit = clonePtr(s.Request.RequestedDailyLimit)
	if s.DeviceCredential != nil {
		c := *s.DeviceCredential
		c.Permissions = slices.Clone(c.Permissions)
		s.DeviceCredential = &c
	}
	if s.Authorization != nil {
		a := *s.Authorization
		a.TaskTypes = slices.Clone(a.TaskTypes)
		a.SingleLimit = clonePtr(a.SingleLimit)
		a.DailyLimit = clonePtr(a.DailyLimit)
		s.Authorization = &a
	}
	s.Acceptance = clonePtr(s.Acceptance)
	return s
}

func cloneBinding(b binding.Binding) binding.Binding {
	b.TaskTypes = slices.Clone(b.TaskTypes)
	b.SingleLimit = clonePtr(b.SingleLimit)
	b.DailyLimit = clonePtr(b.DailyLimit)
	return b
}

// authn.BearerSession and Counter hold no references; these exist so that the day they
// do, there is one place to change and the clone test covers it.

func cloneBearerSession(s authn.BearerSession) authn.BearerSession { return s }

func cloneCounter(c Counter) Counter { return c }

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
