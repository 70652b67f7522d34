package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestFlagRuleInHelp checks that core --help states the one flag rule.
func TestFlagRuleInHelp(t *testing.T) {
	r := run(t, "", "--help")
	for _, want := range []string{"--output text|json", "--out <file>", "--input <json>", "@path", "--config <path>", "--sidecar <url>"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("core --help does not state %q:\n%s", want, r.stdout)
		}
	}
}

// TestFormatSynonymListed checks that the flag rule in core --help names
// every command that takes --format, and only those.
func TestFormatSynonymListed(t *testing.T) {
	rule := strings.Join(strings.Fields(flagRule), " ")
	_, list, ok := strings.Cut(rule, "--format is a synonym on ")
	if !ok {
		t.Fatalf("the flag rule does not say where --format is a synonym:\n%s", flagRule)
	}
	list, _, _ = strings.Cut(list, ".")
	named := map[string]bool{}
	for _, part := range strings.Split(strings.ReplaceAll(list, " and ", ", "), ", ") {
		named[strings.TrimSpace(part)] = true
	}
	root := NewRootCommand(io.Discard, io.Discard)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		name := strings.TrimPrefix(c.CommandPath(), "core ")
		if takes := c.Annotations[annotFormat] != ""; takes != named[name] {
			t.Errorf("%s: takes --format %v, named in the flag rule %v (%q)", c.CommandPath(), takes, named[name], list)
		}
		delete(named, name)
	}
	walk(root)
	for name := range named {
		t.Errorf("the flag rule names %q, which is no command", name)
	}
}

// TestEveryCommandSaysWhatItUses walks the command tree: every runnable
// command is marked in-process, sidecar or config, and an in-process
// command says in its help that it uses neither --config nor --sidecar.
func TestEveryCommandSaysWhatItUses(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c == root || c.Name() == "help" || c.Name() == "completion" || (c.Parent() != nil && c.Parent().Name() == "completion") {
			return
		}
		uses := c.Annotations[annotUses]
		if c.HasSubCommands() && uses == "" {
			return // a group such as "policy" that only lists its commands
		}
		switch uses {
		case "in-process":
			if !strings.Contains(c.Long, "uses neither --config nor --sidecar") {
				t.Errorf("%s is in-process but its help does not say so", c.CommandPath())
			}
		case "sidecar", "config":
		default:
			t.Errorf("%s does not say what it uses: wrap it in inProcess, talksToSidecar or readsConfig (cmd/core/root.go)", c.CommandPath())
		}
	}
	walk(root)
}

// TestNoFileNamedAfterAFormat runs policy bundle with --output json in an
// empty directory: it must not write a file named json.
func TestNoFileNamedAfterAFormat(t *testing.T) {
	pol, err := filepath.Abs("testdata/policy")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"policy", "bundle", "--dir", pol, "--output", "json"},
		{"--output", "json", "policy", "bundle", "--dir", pol},
		{"policy", "bundle", "--dir", pol, "--output", "text"},
	} {
		r := run(t, dir, args...)
		if r.code != exitUsage {
			t.Errorf("core %s: exit %d, want 2", strings.Join(args, " "), r.code)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("core %s wrote %s", strings.Join(args, " "), e.Name())
		}
	}
	// The artifact goes to --out, or to an --output that names a file.
	for _, args := range [][]string{
		{"--output", "json", "policy", "bundle", "--dir", pol, "--out", "a.tar.gz"},
		{"policy", "bundle", "--dir", pol, "--output", "b.tar.gz"},
	} {
		r := run(t, dir, args...)
		if r.code != 0 {
			t.Fatalf("core %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	for _, name := range []string{"a.tar.gz", "b.tar.gz"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("bundle not written: %v", err)
		}
	}
}

// TestConfigUnreadableOnEveryCommand walks the command tree: every
// command, whatever it uses, refuses an unreadable --config with exit 2
// naming the path, before it does anything else (before it reads its
// arguments or checks its required flags).
func TestConfigUnreadableOnEveryCommand(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.toml")
	// Arguments of the commands that require some; cobra checks their
	// number before --config is looked at.
	argsOf := map[string][]string{
		"config diff":           {"testdata/config/svc.toml", "testdata/config/svc.yaml"},
		"config validate":       {"testdata/config/svc.toml"},
		"coverage":              {pol},
		"policy bench":          {pol},
		"policy bundle inspect": {"testdata/nope.tar.gz"},
		"api-key revoke":        {"aeaqcaibaeaq"},
		"policy dry-run":        {pol},
		"policy replay":         {pol},
		"policy plan-resources": {pol},
		"policy lint":           {pol},
		"policy test":           {pol},
	}
	root := NewRootCommand(io.Discard, io.Discard)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Name() == "help" || c.Name() == "completion" || (c.Parent() != nil && c.Parent().Name() == "completion") {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		args := append(path, argsOf[strings.Join(path, " ")]...)
		for _, output := range []string{"text", "json"} {
			r := run(t, "", append([]string{"--config", missing, "--output", output}, args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "--config "+missing+": cannot read") {
				t.Errorf("core --output %s %s with an unreadable --config: exit %d, stderr %q; want 2 naming the path",
					output, strings.Join(path, " "), r.code, r.stderr)
			}
			if output == "json" {
				checkOneJSON(t, r.stdout)
			}
		}
	}
	walk(root)
}

// TestEveryGroupRefusesAMistypedCommand: a command group given a word that
// is none of its commands exits 2 with "unknown command" and, when the
// word is close to one, names it; it never prints its help and exits 0,
// which a script capturing the output (TOKEN=$(core dev tokn)) would take
// for success.
func TestEveryGroupRefusesAMistypedCommand(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	groups := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || !c.HasAvailableSubCommands() || c.Name() == "completion" || c.Name() == "help" {
			return
		}
		// A runnable command with a subcommand (policy bundle and its
		// inspect) takes flags and no positional word of its own.
		var first *cobra.Command
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				first = sub
				break
			}
		}
		groups++
		path := strings.Fields(c.CommandPath())[1:]
		typo := first.Name()[:len(first.Name())-1] + "q"
		r := run(t, t.TempDir(), append(path, typo)...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "unknown command") && !strings.Contains(r.stderr, "unexpected argument") {
			t.Errorf("core %s %s: exit %d, stdout %q, stderr %q; want exit %d and unknown command", strings.Join(path, " "), typo, r.code, r.stdout, r.stderr, exitUsage)
		}
		if strings.Contains(r.stderr, "unknown command") && !strings.Contains(r.stderr, "did you mean "+first.Name()) {
			t.Errorf("core %s %s: stderr %q does not suggest %s", strings.Join(path, " "), typo, r.stderr, first.Name())
		}
	}
	walk(root)
	if groups < 8 {
		t.Errorf("found %d command groups; has the tree changed?", groups)
	}
}
