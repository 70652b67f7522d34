package config

import "github.com/svc-dev/svc/internal/jsonmask"

// decisionLogMask checks decision_log.mask, which applies to the audit
// log too and so is checked whatever the sink.
func (v *validator) decisionLogMask(d DecisionLog) {
	for i, p := range d.Mask {
		if _, err := jsonmask.ParsePointer(p); err != nil {
			v.fail("decision_log.mask", "pointer %d, %v", i+1, err)
		}
	}
}
