// Package version holds the release version of the svc binaries, set at
// build time with -ldflags "-X github.com/svc-dev/svc/engine/version.Version=...".
package version

// Version is the dotted release version.
var Version = "0.1.0"
