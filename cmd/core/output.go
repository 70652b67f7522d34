package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/svc-dev/svc/engine/policy"
)

// table writes aligned columns: cells separated by tabs, rows ending in
// newlines.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 1, ' ', 0) }

// loadPolicy loads a policy directory; a policy that does not load is an
// input error listing every problem, one per line. The offline commands
// (test, bench, coverage) run on the author's machine and accept the
// network built-ins; the sidecar refuses them unless its
// policy.allow_network_builtins is true.
func (a *app) loadPolicy(dir string) (*policy.Set, error) {
	if err := checkPolicyDir(dir); err != nil {
		return nil, err
	}
	set, err := policy.Load(dir, policy.AllowNetworkBuiltins(true))
	if err != nil {
		var perr *policy.Error
		if errors.As(err, &perr) && len(perr.Problems) > 1 {
			return nil, inputError(fmt.Errorf("policy %s does not load:\n%w", dir, err))
		}
		return nil, inputError(fmt.Errorf("policy %s does not load: %w", dir, err))
	}
	a.log.Debug("policy loaded", "dir", dir, "files", len(set.Files()))
	return set, nil
}

// checkPolicyDir is an input error when dir does not exist or is not a
// directory.
func checkPolicyDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return inputError(fmt.Errorf("policy directory %s does not exist", dir))
	case err != nil:
		return inputError(fmt.Errorf("policy directory %s: %w", dir, unwrapPath(err)))
	case !st.IsDir():
		return inputError(fmt.Errorf("policy directory %s is not a directory", dir))
	}
	return nil
}

// defaultFixtures is <dir>/fixtures when it exists, "" otherwise.
func defaultFixtures(dir string) string {
	p := filepath.Join(dir, "fixtures")
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return p
	}
	return ""
}

// plural writes "1 error" or "2 errors".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
