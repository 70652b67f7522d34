package config

import "github.com/svc-dev/svc/internal/jsonmask"

// keptRecordMembers are the members of a decision record no mask may
// erase: consumers de-duplicate the records sent twice by the decision
// id, which every record carries.
var keptRecordMembers = []string{"decision_id"}

// decisionLogMask checks decision_log.mask, which applies to the audit
// log too and so is checked whatever the sink.
func (v *validator) decisionLogMask(d DecisionLog) {
	for i, p := range d.Mask {
		tokens, err := jsonmask.ParsePointer(p)
		if err != nil {
			v.fail("decision_log.mask", "pointer %d, %v", i+1, err)
			continue
		}
		for _, m := range keptRecordMembers {
			if tokens[0] == m {
				v.fail("decision_log.mask", "pointer %d, %q names the record's %s, which no mask erases: consumers de-duplicate records by it", i+1, p, m)
			}
		}
	}
}
