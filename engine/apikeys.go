package engine

import (
	"context"
	"time"

	"github.com/svc-dev/svc/internal/periodic"

	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

// apiKeyPoll is how often api_keys.file is checked for a change: a
// stat, and a read only when its size or modification time moved.
const apiKeyPoll = 2 * time.Second

// apiKeyIdentity is what a key stands for, built once per load of the
// file: the policy input's principal and the claims ValidateToken
// returns, shaped as a token's so that policies see one kind of user.
type apiKeyIdentity struct {
	principal *principal
	claims    map[string]any
}

// apiKeySet is the keys in force and their identities.
type apiKeySet struct {
	set   *apikey.Set
	users map[string]*apiKeyIdentity
}

func newAPIKeySet(set *apikey.Set) *apiKeySet {
	s := &apiKeySet{set: set, users: make(map[string]*apiKeyIdentity, set.Len())}
	for _, k := range set.Keys() {
		roles := make([]any, len(k.Roles))
		for i, r := range k.Roles {
			roles[i] = r
		}
		claims := map[string]any{"sub": k.Subject, "tenant_id": k.Tenant, "roles": roles, "api_key_id": k.ID}
		u := policy.User{ID: k.Subject, TenantID: k.Tenant, Roles: k.Roles, Claims: map[string]any{"api_key_id": k.ID}}
		if len(k.Roles) > 0 {
			u.Role = k.Roles[0]
		}
		s.users[k.ID] = &apiKeyIdentity{principal: newPrincipal(KindAPIKey, "", "", u), claims: claims}
	}
	return s
}

// openAPIKeys reads api_keys.file: a file that cannot be read or parsed
// refuses the start.
func (e *Engine) openAPIKeys() error {
	path := e.cfg.APIKeys.File
	f, err := apikey.Open(path, e.now())
	if err != nil {
		return &SettingError{Key: "api_keys.file", Origin: e.cfg.Origin("api_keys.file"), Msg: err.Error(), Err: err}
	}
	e.apiKeyFile = f
	e.apiKeys.Store(newAPIKeySet(f.Set()))
	e.log.Info("api keys loaded", "file", path, "keys", f.Set().Len())
	return nil
}

// watchAPIKeys re-reads api_keys.file when it changes, until ctx ends.
func (e *Engine) watchAPIKeys(ctx context.Context) {
	defer close(e.apiKeysDone)
	periodic.Every(ctx, apiKeyPoll, func() { e.reloadAPIKeys(ctx) })
}

// ReloadAPIKeys re-reads api_keys.file now if it changed (the sidecar
// calls it on SIGHUP and on a policy reload; it is polled anyway). A
// file that does not parse is refused: the error is logged, counted
// (svc.api_keys.refusals) and shown in Status, and the previous keys
// stay in force. Without api_keys.file it does nothing.
func (e *Engine) ReloadAPIKeys(ctx context.Context) error {
	if e.apiKeyFile == nil {
		return nil
	}
	return e.reloadAPIKeys(ctx)
}

func (e *Engine) reloadAPIKeys(ctx context.Context) error {
	changed, err := e.apiKeyFile.Reload(e.now())
	if err != nil {
		e.log.ErrorContext(ctx, "api key file refused; the previous keys stay in force", "err", err)
		return err
	}
	if changed {
		set := e.apiKeyFile.Set()
		e.apiKeys.Store(newAPIKeySet(set))
		e.log.InfoContext(ctx, "api keys reloaded", "file", e.cfg.APIKeys.File, "keys", set.Len())
	}
	return nil
}

// verifyAPIKey judges an API key against the keys in force.
func (e *Engine) verifyAPIKey(key string) (TokenDecision, *principal) {
	keys := e.apiKeys.Load()
	if keys == nil {
		// No api_keys.file: no key can be known.
		if _, ok := apikey.Split(key); !ok {
			return TokenDecision{Reason: reason.APIKeyMalformed, Message: "not an API key"}, nil
		}
		return TokenDecision{Reason: reason.APIKeyUnknown, Message: "unknown API key"}, nil
	}
	k, code := keys.set.Verify(key, e.now())
	if code != reason.OK {
		return TokenDecision{Reason: code, Message: apiKeyMessages[code]}, nil
	}
	id := keys.users[k.ID]
	return TokenDecision{Allowed: true, Claims: id.claims, Reason: reason.OK, Subject: k.Subject, TenantID: k.Tenant, Kind: KindAPIKey}, id.principal
}

var apiKeyMessages = map[reason.Code]string{
	reason.APIKeyMalformed: "not an API key",
	reason.APIKeyUnknown:   "unknown API key",
	reason.APIKeyRevoked:   "the API key is revoked",
	reason.APIKeyExpired:   "the API key has expired",
}
