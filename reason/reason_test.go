package reason

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorCodes(t *testing.T) {
	base := errors.New("boom")
	err := fmt.Errorf("verify: %w", Wrap(TokenExpired, base, "exp %d", 5))
	tests := []struct {
		name string
		got  bool
	}{
		{"is same code", errors.Is(err, &Error{Code: TokenExpired})},
		{"is not other code", !errors.Is(err, &Error{Code: SignatureInvalid})},
		{"unwraps to cause", errors.Is(err, base)},
		{"of returns code", Of(err, PolicyError) == TokenExpired},
		{"of default", Of(base, PolicyError) == PolicyError},
		{"message", err.Error() == "verify: token-expired: exp 5: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.got {
				t.Fatalf("%s failed for %v", tt.name, err)
			}
		})
	}
}
