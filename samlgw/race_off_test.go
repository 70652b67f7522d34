//go:build !race

package samlgw

// cpuScale multiplies the CPU budgets of the tests (see race_on_test.go).
const cpuScale = 1
