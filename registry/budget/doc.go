// Package budget holds the registry's rate budgets: how many events of one kind a party — a
// client address, an address block, a node key — may spend per window before it is refused,
// and the names those refusals carry.
//
// It decides, from counts it keeps in memory, whether a party has spent its budget: login
// attempts and failures, malformed requests and replayed heartbeats per address and block
// ([Addresses], [Window]); failed resolves naming a node ([NodeFailures]); which heartbeats a
// key's mark answers without a verification ([HeartbeatMarks]). Every table is bounded, and
// a full one forgets its least useful entry rather than charge a key with another's events.
// [Names] lists every limit a refusal can name (the metric label of a refusal), and
// [RateLimited] makes the refusal.
//
// It does not choose the limits (package registry's Limits does, with their reasons), keep
// counts that must be shared by daemons on one store (the store's counters do), decide who
// holds a place in a full table (package registry/admission), or answer HTTP.
package budget
