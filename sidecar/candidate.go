package sidecar

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/dryrun"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

// loadCandidate reads a dry-run candidate bundle. A candidate is never
// activated, but it sees every live input (claims, API keys, query
// values), so it is held to what an activated bundle is: with
// policy.bundle_verify_key_file set it must be signed by that key (409
// signed-bundle-required when unsigned, as a directory reload is refused;
// 422 bundle-signature-invalid when the signature does not verify), and
// it compiles with the served policy's options, so that without
// policy.allow_network_builtins it cannot call http.send (422
// policy-builtin-forbidden). Without a key, an unsigned candidate is
// accepted as before.
func (s *Server) loadCandidate(data []byte) (*policy.Set, error) {
	cfg := s.deps.Engine.Config()
	var verify *bundle.VerifyOptions
	if cfg.Policy.BundleVerifyKeyFile != "" {
		var err error
		if verify, err = s.bundleVerification(); err != nil {
			return nil, &dryrun.CandidateError{Status: http.StatusBadRequest, Code: reason.InputInvalid, Msg: err.Error()}
		}
	}
	limit := bundleMaxBytes(cfg.Policy)
	set, _, err := s.bundleLoader(bundle.LimitsOf(limit)).Open(bytes.NewReader(data), verify, engine.PolicyOptions(cfg)...)
	var ve *bundle.VerificationError
	switch {
	case err == nil:
		return set, nil
	case errors.Is(err, bundle.ErrTooLarge):
		tl := bundleTooLarge("candidate bundle ("+err.Error()+")", limit)
		return nil, &dryrun.CandidateError{Status: tl.status, Code: tl.code, Msg: tl.msg}
	case errors.Is(err, bundle.ErrUnsigned):
		return nil, &dryrun.CandidateError{Status: http.StatusConflict, Code: reason.SignedBundleRequired,
			Msg: "policy.bundle_verify_key_file is set: a dry-run candidate must be a bundle signed by its key, as an activated one must (core policy bundle --sign-key)"}
	case errors.As(err, &ve):
		return nil, &dryrun.CandidateError{Status: http.StatusUnprocessableEntity, Code: reason.BundleSignatureInvalid,
			Msg: "candidate rejected: " + err.Error() + "; sign it with the private key whose public key is policy.bundle_verify_key_file"}
	default:
		return nil, &dryrun.CandidateError{Status: http.StatusUnprocessableEntity, Code: policy.ReasonOf(err),
			Msg: "candidate rejected: " + err.Error()}
	}
}
