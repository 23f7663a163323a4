package registry

// LogRegistrationsOff leaves s's registrations unlogged, for the benchmark that measures the
// log's cost.
func LogRegistrationsOff(s *Service) { s.logState.registrationsOff = true }
