package docgen

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// CobraReference renders a cobra command tree as Markdown: the global
// flags once, then one section per visible command, depth first in the
// order of the tree, with its use line, description and own flags. The
// help and completion commands are left out (their help is cobra's).
func CobraReference(root *cobra.Command) string {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n%s\n\n", root.Name(), descr(root))
	fmt.Fprintf(&b, "```text\n%s\n", root.UseLine())
	if f := root.PersistentFlags().FlagUsages(); f != "" {
		fmt.Fprintf(&b, "\nGlobal flags (every command):\n%s", f)
	}
	b.WriteString("```\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || !sub.IsAvailableCommand() && !sub.HasSubCommands() || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if sub.Runnable() {
				fmt.Fprintf(&b, "\n### %s\n\n%s\n\n```text\n%s\n", sub.CommandPath(), descr(sub), sub.UseLine())
				if len(sub.Aliases) > 0 {
					fmt.Fprintf(&b, "\nAliases: %s\n", strings.Join(sub.Aliases, ", "))
				}
				if f := sub.LocalNonPersistentFlags().FlagUsages(); f != "" {
					fmt.Fprintf(&b, "\nFlags:\n%s", f)
				}
				if ex := strings.TrimSpace(sub.Example); ex != "" {
					fmt.Fprintf(&b, "\nExamples:\n%s\n", ex)
				}
				b.WriteString("```\n")
			}
			walk(sub)
		}
	}
	walk(root)
	return b.String()
}

// descr is a command's long description, else its short one, as prose.
func descr(c *cobra.Command) string {
	d := strings.TrimSpace(c.Long)
	if d == "" {
		d = strings.TrimSpace(c.Short)
	}
	// A description is shown as cobra prints it: its own line breaks and
	// indentation matter (lists, aligned examples), so keep it verbatim
	// in a block when it has more than one line.
	if strings.Contains(d, "\n") {
		return "```text\n" + d + "\n```"
	}
	return d
}

// HelpReference renders a program's whole --help text as one block.
func HelpReference(name, help string) string {
	return fmt.Sprintf("### %s\n\n`%s --help` prints:\n\n```text\n%s\n```\n", name, name, strings.TrimRight(help, "\n"))
}
