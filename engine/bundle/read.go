package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/svc-dev/svc/engine/policy"
)

// verifyKeyID is the name the verification key goes by in OPA's key
// configuration. Naming it ourselves, rather than looking it up by the
// kid the signature carries, means the one configured key is the only key
// ever tried.
const verifyKeyID = "svc-verify-key"

// Inspect reads a bundle and describes it without verifying its
// signature: Info.Signature says what the signature claims. The bundle is
// parsed in full, so a bundle whose modules do not parse or whose roots do
// not permit its contents is an error.
func Inspect(r io.Reader) (Info, error) {
	a, err := readArchive(r, DefaultLimits)
	if err != nil {
		return Info{}, err
	}
	info, err := a.info()
	if err != nil {
		return Info{}, err
	}
	if info.Signature, err = a.signature(); err != nil {
		return Info{}, err
	}
	if _, err := a.fullReader().WithSkipBundleVerification(true).WithRegoVersion(ast.RegoV1).Read(); err != nil {
		return Info{}, fmt.Errorf("read bundle: %w", err)
	}
	return info, nil
}

// CheckArchive reads r as a bundle archive, a gzipped tar within the
// package limits whose manifest decodes, without parsing its modules or
// verifying its signature. Its errors match ErrMalformed, and ErrTooLarge
// when the archive is over the limits.
func CheckArchive(r io.Reader) error {
	return CheckArchiveWithin(r, DefaultLimits)
}

// CheckArchiveWithin is CheckArchive within lim.
func CheckArchiveWithin(r io.Reader, lim Limits) error {
	_, err := readArchive(r, lim)
	return err
}

// Verify reads a bundle and checks that it is signed by the key in
// pubKeyPEM and that every file matches the digest the signature lists.
// An unreadable bundle is an ordinary error; a readable bundle that fails
// verification is a *VerificationError, returned with the bundle's Info.
func Verify(r io.Reader, pubKeyPEM []byte) (Info, error) {
	info, _, err := read(r, DefaultLimits, &VerifyOptions{PublicKeyPEM: pubKeyPEM})
	return info, err
}

// Load reads a bundle and compiles it into a policy set whose revision is
// the manifest's. With verify set, the bundle must pass Verify with those
// options: an unsigned or wrongly signed bundle is always rejected. With
// verify nil, signatures are not checked. The modules compile with opts
// (by default without policy.NetworkBuiltins). Compile errors are
// *policy.Error.
func Load(r io.Reader, verify *VerifyOptions, opts ...policy.Option) (*policy.Set, error) {
	set, _, err := Open(r, verify, opts...)
	return set, err
}

// Open is Load that also returns the bundle's Info (revision, creation
// time, signature), which callers need to order bundles.
func Open(r io.Reader, verify *VerifyOptions, opts ...policy.Option) (*policy.Set, Info, error) {
	return OpenWithin(r, DefaultLimits, verify, opts...)
}

// OpenWithin is Open within lim instead of DefaultLimits.
func OpenWithin(r io.Reader, lim Limits, verify *VerifyOptions, opts ...policy.Option) (*policy.Set, Info, error) {
	return Loader{Limits: lim}.Open(r, verify, opts...)
}

// GC is what sets the collector's target in a process that tunes it
// (internal/gctune's Tuner in svc-sidecar): Hold sets GOGC to percent,
// and keeps it from being overwritten, until release is called.
type GC interface {
	Hold(percent int) (release func())
}

// Loader opens bundles as Open does, within its Limits and through its
// GC.
type Loader struct {
	// Limits bound each bundle; zero means DefaultLimits.
	Limits Limits
	// GC, when set, holds the collector's target at loadGCPercent while
	// a bundle loads. Without it the loader sets GOGC itself and
	// restores the value it found, which a tuner of its own would
	// overwrite at its next collection (and whose value the loader would
	// then overwrite when restoring).
	GC GC
}

// Open is Open within l.Limits, holding the collector's target through
// l.GC while the bundle loads.
func (l Loader) Open(r io.Reader, verify *VerifyOptions, opts ...policy.Option) (*policy.Set, Info, error) {
	lim := l.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	if l.GC != nil {
		defer l.GC.Hold(loadGCPercent)()
	} else {
		defer lowerGC()()
	}
	info, c, err := read(r, lim, verify)
	if err != nil {
		return nil, info, err
	}
	// The data was decoded from the archive's files into a compact tree
	// as they were unpacked, and the manifest names the revision: the set
	// need not copy the data nor digest it.
	opts = append(slices.Clip(opts), policy.WithCompactData(c.data), policy.Revision(info.Revision))
	set, err := policy.FromModules(c.modules, nil, opts...)
	if err != nil {
		return nil, info, err
	}
	return set.WithRevision(info.Revision), info, nil
}

// loadGCPercent is the collector's target (GOGC) while a bundle loads.
// Loading makes garbage at the rate of the data's size (the archive
// unpacked, decoded, hashed, converted to AST values); at the default 100
// the heap may grow to twice what is live before a collection, which for
// a large bundle is hundreds of MB above what stays. A lower target
// trades CPU during the load, which is rare, for that peak.
const loadGCPercent = 25

// loading counts the loads under way, so that the collector's target is
// lowered by the first and restored by the last.
var loading struct {
	sync.Mutex
	n   int
	old int
}

// lowerGC lowers the collector's target to loadGCPercent, unless it is
// lower already or off, until the returned function is called. It is the
// target's owner where a Loader is given no GC.
func lowerGC() (restore func()) {
	loading.Lock()
	defer loading.Unlock()
	if loading.n == 0 {
		loading.old = debug.SetGCPercent(loadGCPercent)
		if loading.old < loadGCPercent {
			debug.SetGCPercent(loading.old)
		}
	}
	loading.n++
	return func() {
		loading.Lock()
		defer loading.Unlock()
		if loading.n--; loading.n == 0 {
			debug.SetGCPercent(loading.old)
		}
	}
}

// contents is what a set is built from: the modules, by file name, and
// the data.
type contents struct {
	modules map[string]string
	data    *policy.CompactData
}

// read reads within lim and, with opts set, verifies a bundle. The data
// files are read by loadData, which also checks the digests of every file
// against the signature (verified here, by OPA's code); OPA's reader reads
// the modules and the manifest without the data files and checks them
// against the roots, and checkDataRoots the data.
func read(r io.Reader, lim Limits, opts *VerifyOptions) (Info, contents, error) {
	a, err := readArchive(r, lim)
	if err != nil {
		return Info{}, contents{}, err
	}
	info, err := a.info()
	if err != nil {
		return Info{}, contents{}, err
	}
	// fail makes an error of reading the bundle: when verifying, the
	// archive listed and parsed above, so what fails is the signature, a
	// digest or a file the digest covers.
	fail := func(err error) error {
		if opts != nil {
			return &VerificationError{Err: err}
		}
		return fmt.Errorf("read bundle: %w", err)
	}
	var files map[string]opabundle.FileInfo
	if opts != nil {
		if files, err = a.verifySignature(&info, opts); err != nil {
			return info, contents{}, err
		}
	}
	data, err := a.loadData(files)
	if err != nil {
		return info, contents{}, fail(err)
	}
	b, err := a.reader().WithSkipBundleVerification(true).WithRegoVersion(ast.RegoV1).Read()
	if err != nil {
		return info, contents{}, fail(err)
	}
	if opts != nil && b.Type() == opabundle.DeltaBundleType {
		return info, contents{}, fail(errors.New("delta bundles do not support signature verification"))
	}
	if err := checkDataRoots(data, info.Roots); err != nil {
		return info, contents{}, fail(err)
	}
	modules := make(map[string]string, len(b.Modules))
	for _, m := range b.Modules {
		modules[strings.TrimPrefix(m.Path, "/")] = string(m.Raw)
	}
	info.Verified = opts != nil
	return info, contents{modules: modules, data: data}, nil
}

// verifySignature checks the signature of the bundle against the key of
// opts and returns the digests it lists, by path.
func (a *archive) verifySignature(info *Info, opts *VerifyOptions) (map[string]opabundle.FileInfo, error) {
	var err error
	if info.Signature, err = a.signature(); err != nil {
		// A signature that cannot even be decoded fails verification.
		return nil, &VerificationError{Err: err}
	}
	vc, err := verificationConfig(*info, opts)
	if err != nil {
		return nil, err
	}
	if len(a.signatureFiles) > 1 {
		return nil, &VerificationError{Err: fmt.Errorf("bundle contains multiple signatures files: %q and %q", a.signatureFiles[0], a.signatureFiles[1])}
	}
	var sc opabundle.SignaturesConfig
	if err := util.NewJSONDecoder(bytes.NewReader(a.signatures)).Decode(&sc); err != nil {
		return nil, &VerificationError{Err: fmt.Errorf("bundle load failed on signatures decode: %w", err)}
	}
	files, err := opabundle.VerifyBundleSignature(sc, vc)
	if err != nil {
		return nil, &VerificationError{Err: err}
	}
	return files, nil
}

// verificationConfig builds OPA's verification configuration for the one
// key of opts, after the checks OPA leaves to its caller: the bundle is
// signed at all, the key id matches when one is required, and the
// algorithm fits the key.
func verificationConfig(info Info, opts *VerifyOptions) (*opabundle.VerificationConfig, error) {
	pub, keyPEM, err := parsePublicKey(opts.PublicKeyPEM)
	if err != nil {
		// A configured but unusable key must not let anything through.
		return nil, &VerificationError{Err: fmt.Errorf("verification key: %w", err)}
	}
	sig := info.Signature
	if sig == nil {
		return nil, &VerificationError{Err: ErrUnsigned}
	}
	if opts.KeyID != "" && sig.KeyID != opts.KeyID {
		return nil, &VerificationError{Err: fmt.Errorf("signed with key id %q, want %q", sig.KeyID, opts.KeyID)}
	}
	alg, err := algFor(pub, opts.Alg, sig.Alg)
	if err != nil {
		return nil, &VerificationError{Err: err}
	}
	if sig.Alg != alg {
		return nil, &VerificationError{Err: fmt.Errorf("signed with %s, want %s", sig.Alg, alg)}
	}
	keys := map[string]*opabundle.KeyConfig{
		verifyKeyID: {Key: string(keyPEM), Algorithm: alg},
	}
	return opabundle.NewVerificationConfig(keys, verifyKeyID, "", nil), nil
}
