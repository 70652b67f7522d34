// Package secretfile reads the one-line secrets that settings name by
// file (tokens, client secrets, passwords), one way for all of them.
package secretfile

import (
	"fmt"
	"os"
	"strings"
)

// Error is the error of a secret file that cannot be used. It names the
// setting and the file, never the secret.
type Error struct {
	// Key is the setting that names the file (sidecar.admin_token_file).
	Key string
	Err error
}

func (e *Error) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Read reads the secret of the file at path, which setting key names.
// The file holds one line: whitespace around it, its final newline
// included, is ignored; an empty file, or one of several lines, is
// refused.
func Read(key, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &Error{key, err}
	}
	s, err := parse(string(b))
	if err != nil {
		return "", &Error{key, fmt.Errorf("%s %w", path, err)}
	}
	return s, nil
}

// parse is the secret of a file's content.
func parse(content string) (string, error) {
	s := strings.TrimSpace(content)
	if s == "" {
		return "", errEmpty
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", errLines
	}
	return s, nil
}

type parseError string

func (e parseError) Error() string { return string(e) }

const (
	errEmpty parseError = "is empty"
	errLines parseError = "holds more than one line"
)
