// Package layers holds, in its test, the rules of which of the module's
// packages may link which: the table of docs/design.md ("Package
// dependencies"), checked against `go list` of the whole module and
// against the page itself, so that neither the code nor the page drifts.
// It has no code of its own.
package layers
