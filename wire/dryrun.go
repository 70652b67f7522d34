package wire

import "time"

// Limits of a dry-run session, which POST /v1/dry-run/sessions enforces
// and the CLI checks before it uploads a candidate.
const (
	DryRunDefaultQueueSize = 1024
	DryRunMaxQueueSize     = 1 << 16
	DryRunMaxDuration      = 24 * time.Hour
)

// Values of DryRunReport.State.
const (
	DryRunRunning  = "running"
	DryRunFinished = "finished"
)

// DryRunReport is the state of a dry-run session; its JSON form is what
// the sidecar answers and core policy dry-run --output json prints.
type DryRunReport struct {
	ID       string     `json:"id"`
	Revision string     `json:"revision"`
	State    string     `json:"state"` // DryRunRunning or DryRunFinished
	Started  time.Time  `json:"started"`
	Ends     time.Time  `json:"ends"`
	Ended    *time.Time `json:"ended,omitempty"`
	// Decisions counts the policy decisions offered to the session;
	// Evaluated + Skipped = Decisions once the session has finished.
	Decisions     uint64 `json:"decisions"`
	Evaluated     uint64 `json:"evaluated"`
	Allow         uint64 `json:"allow"`
	SimulatedDeny uint64 `json:"simulated_deny"`
	Errors        uint64 `json:"errors"`
	// Timeouts counts the evaluations cut off after
	// policy.dry_run_eval_timeout; they are among Errors.
	Timeouts      uint64        `json:"timeouts"`
	Skipped       uint64        `json:"skipped"`
	TopDenyReason []ReasonCount `json:"top_deny_reasons"`
	Changed       []Change      `json:"changed"`
}

// ReasonCount is a deny reason and how often the candidate gave it.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
}

// Change counts the decisions of one action and tenant that the candidate
// would decide differently from enforcement.
type Change struct {
	// Change is "newly-denied" (enforcement allowed, the candidate
	// denies) or "newly-allowed".
	Change string `json:"change"`
	Action string `json:"action"`
	Tenant string `json:"tenant"`
	Count  uint64 `json:"count"`
}
