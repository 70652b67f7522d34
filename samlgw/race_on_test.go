//go:build race

package samlgw

// cpuScale multiplies the CPU budgets of the tests: the race detector
// makes every memory access several times dearer.
const cpuScale = 10
