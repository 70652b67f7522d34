package policy

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/svc-dev/svc/reason"
)

// NetworkBuiltins are the built-ins a policy may call only when compiled
// with AllowNetworkBuiltins: http.send and net.lookup_ip_addr reach the
// network (a request, a DNS query), so a policy calling them can send its
// input (tokens' claims, API keys, query values) to any host; opa.runtime
// reads the process's environment and configuration. net.cidr_* and the
// other net.* built-ins are pure and stay.
var NetworkBuiltins = []string{"http.send", "net.lookup_ip_addr", "opa.runtime"}

// SettingAllowNetworkBuiltins is the configuration key that turns
// NetworkBuiltins on in the sidecar, named in compile errors.
const SettingAllowNetworkBuiltins = "policy.allow_network_builtins"

// CodeBuiltinForbidden is the problem code of a call to one of
// NetworkBuiltins in a set compiled without AllowNetworkBuiltins.
const CodeBuiltinForbidden = "builtin_forbidden"

// Option changes how a policy set is compiled.
type Option func(*options)

type options struct {
	networkBuiltins bool
	// decodedJSON and revision: see DecodedJSON and Revision.
	decodedJSON bool
	revision    string
	// compact is the data given with WithCompactData, nil for none.
	compact *CompactData
	// cacheSize is DecisionCacheSize's, nil for the default.
	cacheSize *int
}

// AllowNetworkBuiltins lets the policies call NetworkBuiltins, and
// json.match_schema and json.verify_schema fetch remote $ref documents,
// when allow is true. By default they cannot: a call to one of them is a
// compile error with CodeBuiltinForbidden.
func AllowNetworkBuiltins(allow bool) Option {
	return func(o *options) { o.networkBuiltins = allow }
}

// decisionCacheSize is the bound of the set's decision cache.
func (o options) decisionCacheSize() int {
	if o.cacheSize == nil {
		return DefaultDecisionCacheSize
	}
	return *o.cacheSize
}

func optionsOf(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// capabilities is what the compiler and the prepared queries may use:
// nil (everything OPA has) with network built-ins allowed, otherwise
// restrictedCapabilities.
func (o options) capabilities() *ast.Capabilities {
	if o.networkBuiltins {
		return nil
	}
	return restrictedCapabilities()
}

// restrictedCapabilities are OPA's capabilities without NetworkBuiltins,
// and with no host allowed for the network access that remains
// (json.match_schema's remote $ref), computed once: they are never
// modified.
var restrictedCapabilities = sync.OnceValue(func() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		return slices.Contains(NetworkBuiltins, b.Name)
	})
	caps.AllowNet = []string{}
	return caps
})

// forbiddenBuiltins turns the type errors OPA gives for a call to a
// built-in the capabilities leave out ("undefined function http.send")
// into problems that say why and which setting allows it.
func forbiddenBuiltins(problems []Problem) []Problem {
	for i, p := range problems {
		name, ok := strings.CutPrefix(p.Msg, "undefined function ")
		if p.Code != ast.TypeErr || !ok || !slices.Contains(NetworkBuiltins, name) {
			continue
		}
		problems[i].Code = CodeBuiltinForbidden
		problems[i].Msg = name + " is a network built-in, forbidden unless " + SettingAllowNetworkBuiltins + " = true"
	}
	return problems
}

// Reason is the reason code of the failure to compile a set:
// reason.PolicyBuiltinForbidden when a problem is a forbidden built-in,
// reason.PolicyError otherwise.
func (e *Error) Reason() reason.Code {
	for _, p := range e.Problems {
		if p.Code == CodeBuiltinForbidden {
			return reason.PolicyBuiltinForbidden
		}
	}
	return reason.PolicyError
}

// ReasonOf is the reason code of err as a policy failure: that of an
// *Error, reason.PolicyError for any other.
func ReasonOf(err error) reason.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason()
	}
	return reason.PolicyError
}
