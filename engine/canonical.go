package engine

import (
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/reqpath"
)

// canonOf is how the deployment makes request paths canonical: the
// letter case and format suffixes its route table folds and cuts, so
// that input.request.canonical_path names the route the request takes.
func canonOf(cfg config.Config) reqpath.Canon {
	return reqpath.Canon{CaseSensitive: cfg.Envoy.RoutesCaseSensitive, Formats: cfg.Envoy.Formats()}
}

// canonicalize sets r.CanonicalPath and r.Format from r.Path, with the
// rules envoy's Mapper applies (reqpath, canonOf), so that a policy that
// compares the canonical path cannot be bypassed through another surface
// (Envoy Check, the HTTP check, Authorize called with a request). Decide
// calls it for every request but those whose mapper computed the fields
// itself (Request.Canonical). An empty path has an empty canonical path;
// a path without a single meaning (reqpath.Clean) is an error carrying
// reason.PathInvalid.
//
// Fields already holding the values are not written, so a request that
// arrives canonical is only read.
func (e *Engine) canonicalize(r *policy.Request) error {
	var canonical, format string
	if r.Path != "" {
		var err error
		if canonical, format, err = e.canon.Path(r.Path); err != nil {
			return err
		}
	}
	if r.CanonicalPath != canonical {
		r.CanonicalPath = canonical
	}
	if r.Format != format {
		r.Format = format
	}
	return nil
}
