package registry

// LogRegistrationsOff leaves s's registrations unlogged, for the benchmark that measures the
// log's cost.
func LogRegistrationsOff(s *Service) { s.logState.registrationsOff = true }

// NodesChanged marks s's cached node listings out of date, as a registration does, for the
// benchmark that measures the first listing after a change.
func NodesChanged(s *Service) { s.nodesChanged() }

// ListingSnapshots is the number of node listing snapshots s has taken.
func ListingSnapshots(s *Service) uint64 { return s.lists.Built() }
