package engine

import (
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/internal/jsonmask"
)

// openDecisionMask parses decision_log.mask, which validation has
// checked already.
func (e *Engine) openDecisionMask() error {
	m, err := jsonmask.Parse(e.cfg.DecisionLog.Mask)
	if err != nil {
		return &SettingError{Key: "decision_log.mask", Origin: e.cfg.Origin("decision_log.mask"), Msg: err.Error(), Err: err}
	}
	e.decisionMask = m
	return nil
}

// decisionRecord is the JSON of the decision record of rec: the audit
// record's object with the redacted input as its last member, "input"
// (unless decision_log.include_input is false), then decision_log.mask
// applied. Credentials are redacted before the mask runs, so that no
// mask can bring them back. Without a mask the record is not parsed
// again.
func (e *Engine) decisionRecord(rec *audit.Record, in *Input) ([]byte, error) {
	b := rec.AppendJSON(make([]byte, 0, 1024))
	if e.cfg.DecisionLog.IncludesInput() {
		b = append(b[:len(b)-1], `,"input":`...)
		b = append(b, RedactedInput(*in)...)
		b = append(b, '}')
	}
	if e.decisionMask.Empty() {
		return b, nil
	}
	b, _, err := e.decisionMask.Apply(b)
	return b, err
}
