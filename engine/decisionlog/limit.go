package decisionlog

import (
	"github.com/svc-dev/svc/internal/jsonscan"
)

// RecordLimiter is a Sink that takes records up to a size. A record over
// it would be refused by the sink each time its batch is sent, and every
// record spooled after it would wait behind it: Log refuses such a
// record (ErrTooLarge), so that its caller logs it without its input, and
// the shipper sends one already spooled without its input, or drops it
// when even that is too large.
type RecordLimiter interface {
	// MaxRecordBytes bounds a record's JSON; 0 while no bound is known
	// (a sink not yet connected).
	MaxRecordBytes() int
}

// InputOmitted is the member a decision record holds instead of "input"
// when the record with its input was too large to log: its value says
// why ("too-large").
const InputOmitted = "input_omitted"

// withoutInput is the JSON object rec without its top-level "input" (and
// any "input_omitted"), with "input_omitted":"too-large" in its place;
// false when rec is not a JSON object.
func withoutInput(rec []byte) ([]byte, bool) {
	i := jsonscan.SkipSpace(rec, 0)
	if i >= len(rec) || rec[i] != '{' {
		return nil, false
	}
	out := make([]byte, 0, 512)
	out = append(out, '{')
	for i = jsonscan.SkipSpace(rec, i+1); i < len(rec) && rec[i] != '}'; {
		if rec[i] == ',' {
			i = jsonscan.SkipSpace(rec, i+1)
		}
		start := i
		kend, ok := jsonscan.SkipValue(rec, i)
		if !ok || rec[i] != '"' {
			return nil, false
		}
		key := rec[i:kend]
		i = jsonscan.SkipSpace(rec, kend)
		if i >= len(rec) || rec[i] != ':' {
			return nil, false
		}
		vend, ok := jsonscan.SkipValue(rec, jsonscan.SkipSpace(rec, i+1))
		if !ok {
			return nil, false
		}
		i = jsonscan.SkipSpace(rec, vend)
		if input, _ := jsonscan.KeyIs(key, "input"); input {
			continue
		}
		if omitted, _ := jsonscan.KeyIs(key, InputOmitted); omitted {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, rec[start:vend]...)
	}
	if i >= len(rec) {
		return nil, false
	}
	if len(out) > 1 {
		out = append(out, ',')
	}
	return append(out, `"`+InputOmitted+`":"too-large"}`...), true
}
