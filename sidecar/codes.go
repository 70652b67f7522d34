package sidecar

import "github.com/svc-dev/svc/reason"

// The sidecar's codes, by their former names in this package: package
// reason defines them.
//
// Deprecated: use the codes of package reason (reason.SignedBundleRequired
// for CodeSignedBundleRequired, and so on). These names will be removed in
// the next release.
const (
	CodeSignedBundleRequired       = reason.SignedBundleRequired
	CodeRevisionOlder              = reason.RevisionOlder
	CodeBundleUnordered            = reason.BundleUnordered
	CodeBundleStale                = reason.PolicyBundleStale
	CodeBundleRollback             = reason.PolicyBundleRollback
	CodeBundleRedirectRefused      = reason.BundleRedirectRefused
	CodeHandoverRefused            = reason.PolicyHandoverRefused
	CodeSAMLSignatureCheckDisabled = reason.SAMLSignatureCheckDisabled
	CodeAPIKeysFileRefused         = reason.APIKeysFileRefused
	CodeDecisionLogDropped         = reason.DecisionLogDropped
	CodeCrossSite                  = reason.CrossSiteRequest
	CodeHostNotAllowed             = reason.HostNotAllowed
	CodeAdminTokenRequired         = reason.AdminTokenRequired
	CodeNotFound                   = reason.NotFound
	CodeRestartUnsupported         = reason.RestartUnsupported
)
