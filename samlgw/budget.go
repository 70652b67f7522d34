package samlgw

import "time"

// Pacing of the ACS work. Each slot of a lane may keep a CPU busy a
// paceShare of the time on average, with bursts of up to paceBurst of
// work: a real response validates in about 0.5 ms, so a slot sustains
// about 100 sign-ons a second and bursts of 500 pass untouched, while a
// flood of costly documents (25-100 ms each at the bounds) is answered
// saml-busy once the burst is spent and the checks keep the CPU
// (BenchmarkCheckUnderACSFlood: Check p99 4.4 ms under an 80 posts/s flood
// without pacing, 3.0 ms at a quarter of a CPU, 1.6 ms at a twentieth,
// 0.65 ms quiet; what remains is the flood's own HTTP traffic). The work
// charged is the validating thread's CPU time (startWork), so a slow
// replay store does not throttle real sign-ons.
const (
	paceShare = 0.05
	paceBurst = 250 * time.Millisecond
)

// Pacing of one client (clientOf), whatever the lane: a fiftieth of a CPU
// with bursts of 50 ms of work. One client can then never spend a lane's
// budget, however it posts: it is admitted while its credit is positive,
// so it spends at most its burst and one document (under 100 ms at the
// bounds) before it waits, which leaves a one-slot lane over its reserve
// (laneReserve), and its credit grows back at less than half a slot's. A
// sequential loop of documents at the bounds (60-90 ms of CPU each) gets
// one through at once and then one every four seconds, while one
// address sustains 10 to 40 sign-ons a second after a burst of 25 to 100
// (a sign-on costs 0.5 to 2 ms of CPU; 10 ms with an RSA-4096 encrypted
// assertion): an office behind one address signing in at nine.
const (
	clientShare = 0.02
	clientBurst = 50 * time.Millisecond
)

// bucket is a token bucket of work time: spend charges what a validation
// took; the credit grows back at rate seconds per second of wall time,
// up to burst. It is not safe for concurrent use (the gate's mutex
// guards every bucket).
type bucket struct {
	rate   float64 // credit per second of wall time, in seconds
	burst  time.Duration
	credit time.Duration
	at     time.Time
}

func newBucket(rate float64, burst time.Duration, now time.Time) bucket {
	return bucket{rate: rate, burst: burst, credit: burst, at: now}
}

// refill adds the credit earned since the last call.
func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.credit = min(b.burst, b.credit+time.Duration(float64(d)*b.rate))
	}
	b.at = now
}

// above reports whether the credit at now is over floor.
func (b *bucket) above(now time.Time, floor time.Duration) bool {
	b.refill(now)
	return b.credit > floor
}

// spend charges d of work done by now.
func (b *bucket) spend(now time.Time, d time.Duration) {
	b.refill(now)
	b.credit -= d
}

// full reports whether the bucket holds its whole burst at now: it then
// remembers nothing a new one would not.
func (b *bucket) full(now time.Time) bool {
	b.refill(now)
	return b.credit >= b.burst
}
