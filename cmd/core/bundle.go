package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/policy"
)

// bundleFlags are the flags of `policy bundle`.
type bundleFlags struct {
	dir, signKey, out    string
	revision, keyID, alg string
}

func (a *app) bundleCommand() *cobra.Command {
	var f bundleFlags
	cmd := &cobra.Command{
		Use:   "bundle --dir <dir> --out <file> [--sign-key <pem>]",
		Short: "Package (and sign) a policy directory as an OPA bundle",
		Long: `Packages the policy directory --dir as an OPA bundle (tar.gz) written to the
file --out: its Rego modules, its data files merged into one data.json, and a
.manifest with the revision, the roots (svc, plus any top-level data key) and
the creation time. Data of more than 32 MiB, more than a sidecar accepts in
one bundle file by default, is split over several data.json files of at most
32 MiB: each object too large is cut into its members, kept in the data.json
of its own directory (svc/tables/tenants/data.json) and of the directories
above it, which loading merges back into the same data; a value too large
that is not an object is an error. With --sign-key (a PEM private key: EC P-256, or RSA of at
least 2048 bits) it also writes .signatures.json, a JWS over the SHA-256 digest
of every file. The key is read from the file and never printed. A key pair:

  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out signing.pem
  openssl pkey -in signing.pem -pubout -out signing.pub.pem

--output <file> is accepted for --out; --output json reports in JSON (and
never writes a file named json).`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := a.artifactPath(cmd)
			if err != nil {
				return err
			}
			f.out = out
			return a.runBundle(f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "policy `dir` to package (required)")
	fl.StringVar(&f.signKey, "sign-key", "", "sign with the PEM private key in `path`")
	fl.StringVar(&f.revision, "revision", "", "manifest revision (default: the creation time, 20060102T150405Z)")
	fl.StringVar(&f.keyID, "key-id", bundle.DefaultKeyID, "key `id` named in the signature")
	fl.StringVar(&f.alg, "alg", "", "signing `algorithm`: ES256, RS256 or PS256 (default: ES256 for EC keys, RS256 for RSA keys)")
	a.artifactFlag(cmd, "bundle")
	a.formatFlag(cmd)
	_ = cmd.MarkFlagRequired("dir")
	cmd.AddCommand(inProcess(a.bundleInspectCommand()))
	return cmd
}

func (a *app) runBundle(f bundleFlags) error {
	a.useJSON()
	switch f.alg {
	case "", bundle.ES256, bundle.RS256, bundle.PS256:
	default:
		return usageError("invalid --alg %q: want ES256, RS256 or PS256", f.alg)
	}
	if f.alg != "" && f.signKey == "" {
		return usageError("--alg needs --sign-key")
	}
	opts := bundle.BuildOptions{Revision: f.revision, KeyID: f.keyID, Alg: f.alg}
	if f.signKey != "" {
		key, err := os.ReadFile(f.signKey)
		if err != nil {
			return inputError(fmt.Errorf("read --sign-key: %w", err))
		}
		opts.SignKeyPEM = key
	}
	if st, err := os.Stat(f.dir); err != nil {
		return inputError(fmt.Errorf("--dir: %w", err))
	} else if !st.IsDir() {
		return inputError(fmt.Errorf("--dir %s: not a directory", f.dir))
	}
	info, err := writeBundle(f.out, f.dir, opts)
	if perr := (*policy.Error)(nil); errors.As(err, &perr) {
		return inputError(fmt.Errorf("policy %s does not load: %w", f.dir, err))
	}
	if err != nil {
		return inputError(err)
	}
	a.log.Info("bundle written", "file", f.out, "revision", info.Revision)
	if a.json {
		return a.writeJSON(bundleReport{File: f.out, Info: info})
	}
	fmt.Fprintf(a.stdout, "wrote %s\n", f.out)
	printBundleInfo(a.stdout, bundleReport{Info: info})
	return nil
}

// writeBundle builds the bundle into a temporary file beside out and
// renames it into place, so that out is never a half-written bundle.
func writeBundle(out, dir string, opts bundle.BuildOptions) (bundle.Info, error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".bundle-*.tmp")
	if err != nil {
		return bundle.Info{}, fmt.Errorf("--out %s: %w", out, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	// The sidecar decides whether the policy may call network built-ins
	// (policy.allow_network_builtins); a bundle may hold such calls.
	opts.AllowNetworkBuiltins = true
	info, err := bundle.Build(tmp, dir, opts)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", out, cerr)
	}
	if err != nil {
		return bundle.Info{}, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return bundle.Info{}, fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return bundle.Info{}, fmt.Errorf("write %s: %w", out, err)
	}
	return info, nil
}

// bundleReport is the JSON form of `policy bundle` and `bundle inspect`.
type bundleReport struct {
	File string `json:"file"`
	bundle.Info
	// SignatureCheck is set when a verification key was given.
	SignatureCheck *signatureCheck `json:"signature_check,omitempty"`
}

type signatureCheck struct {
	Valid  bool   `json:"valid"`
	Reason string `json:"reason,omitempty"`
}

func (a *app) bundleInspectCommand() *cobra.Command {
	var verifyKey string
	cmd := &cobra.Command{
		Use:   "inspect <file>",
		Short: "Describe a bundle and, with --verify-key, verify its signature",
		Long: `Prints what the bundle holds: revision, roots, creation time, policies and data
files, and whether it is signed (algorithm and key id, as the signature claims).
With --verify-key (a PEM public key or certificate) it also verifies the
signature and every file's digest; an unsigned, tampered or wrongly signed
bundle prints "signature: INVALID (<reason>)" and exits 1.`,
		Args: args("<file>"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			a.useJSON()
			return a.runInspect(argv[0], verifyKey)
		},
	}
	cmd.Flags().StringVar(&verifyKey, "verify-key", "", "verify with the PEM public key in `path`")
	return cmd
}

func (a *app) runInspect(file, verifyKey string) error {
	var key []byte
	if verifyKey != "" {
		var err error
		if key, err = os.ReadFile(verifyKey); err != nil {
			return inputError(fmt.Errorf("read --verify-key: %w", err))
		}
	}
	fh, err := os.Open(file)
	if err != nil {
		return inputError(err)
	}
	defer fh.Close()

	rep := bundleReport{File: file}
	var verr *bundle.VerificationError
	if verifyKey == "" {
		rep.Info, err = bundle.Inspect(fh)
	} else {
		rep.Info, err = bundle.Verify(fh, key)
		rep.SignatureCheck = &signatureCheck{Valid: err == nil}
		if errors.As(err, &verr) {
			rep.SignatureCheck.Reason = verr.Reason()
		}
	}
	if err != nil && verr == nil {
		return inputError(fmt.Errorf("%s: %w", file, err))
	}
	if a.json {
		if err := a.writeJSON(rep); err != nil {
			return err
		}
	} else {
		printBundleInfo(a.stdout, rep)
	}
	if verr != nil {
		return checkFailed(verr, true)
	}
	return nil
}

// printBundleInfo writes the report as aligned "key: value" lines.
func printBundleInfo(w io.Writer, rep bundleReport) {
	info := rep.Info
	tw := table(w)
	if rep.File != "" {
		fmt.Fprintf(tw, "file:\t%s\n", rep.File)
	}
	fmt.Fprintf(tw, "revision:\t%s\n", info.Revision)
	roots := make([]string, len(info.Roots))
	for i, r := range info.Roots {
		roots[i] = r
		if r == "" {
			roots[i] = `"" (all of data)`
		}
	}
	fmt.Fprintf(tw, "roots:\t%s\n", strings.Join(roots, ", "))
	created := "unknown"
	if !info.CreatedAt.IsZero() {
		created = info.CreatedAt.Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "created:\t%s\n", created)
	fmt.Fprintf(tw, "policies:\t%d (%s)\n", len(info.Policies), strings.Join(info.Policies, ", "))
	fmt.Fprintf(tw, "data:\t%d (%s)\n", len(info.DataFiles), strings.Join(info.DataFiles, ", "))
	if s := info.Signature; s != nil {
		fmt.Fprintf(tw, "signed:\tyes, %s, key id %s, %s\n", s.Alg, s.KeyID, plural(s.Files, "file"))
	} else {
		fmt.Fprintf(tw, "signed:\tno\n")
	}
	if c := rep.SignatureCheck; c != nil {
		if c.Valid {
			fmt.Fprintf(tw, "signature:\tvalid (every file matches its signed digest)\n")
		} else {
			fmt.Fprintf(tw, "signature:\tINVALID (%s)\n", c.Reason)
		}
	}
	_ = tw.Flush()
}
