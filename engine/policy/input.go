package policy

// Input is the document a policy sees as `input`. The user part is always
// filled from verified token claims, never from what a caller sends.
type Input struct {
	// Action is "<resource>:<verb>", e.g. "orders:read".
	Action string `json:"action"`
	// User is the authenticated caller.
	User User `json:"user"`
	// Resource is what the action applies to.
	Resource Resource `json:"resource"`
	// Tenant is the deployment's tenant.
	Tenant Tenant `json:"tenant"`
	// Request is present when the input came from a proxy (Envoy, nginx,
	// Caddy); headers never include authorization or cookie.
	Request *Request `json:"request,omitempty"`
	// Identity is the verified identity with the kind of credential that
	// proved it; absent in development mode for an anonymous caller and
	// in inputs a caller evaluates as given.
	Identity *Identity `json:"identity,omitempty"`
}

// Identity is input.identity: who the caller is, as User says, and how
// it proved it. The engine shares Roles and Claims with User (the same
// slice and map): they are read-only.
type Identity struct {
	// Kind is the kind of credential: "jwt", "introspection", "api_key",
	// "mtls" or "session".
	Kind string `json:"kind"`
	// ID is the subject, as input.user.id.
	ID string `json:"id"`
	// TenantID is the tenant, as input.user.tenant_id.
	TenantID string `json:"tenant_id"`
	// Roles are the roles, as input.user.roles.
	Roles []string `json:"roles"`
	// Issuer is who vouched for the credential: a token's iss (an
	// introspected token's too), a certificate's trust domain; "" for an
	// API key.
	Issuer string `json:"issuer,omitempty"`
	// Method is how a session was signed in ("saml" or "oidc"); "" for
	// other kinds.
	Method string `json:"method,omitempty"`
	// Claims are the custom claims, as input.user.claims.
	Claims map[string]any `json:"claims"`
}

// User is input.user.
type User struct {
	// ID is the sub claim.
	ID string `json:"id"`
	// Role is the role claim, or the first of roles.
	Role string `json:"role"`
	// Roles is every role of the user.
	Roles []string `json:"roles"`
	// TenantID is the tenant_id claim.
	TenantID string `json:"tenant_id"`
	// Email is the email claim.
	Email string `json:"email,omitempty"`
	// Claims holds the non-standard claims, untouched.
	Claims map[string]any `json:"claims"`
}

// Resource is input.resource.
type Resource struct {
	// Type is the resource kind ("orders"); the action's prefix.
	Type string `json:"type,omitempty"`
	// ID identifies the resource, when known.
	ID string `json:"id"`
	// Tenant owns the resource; defaults to the deployment's tenant.
	Tenant string `json:"tenant"`
	// Attributes are what the caller tells about the resource (owner,
	// status, department…), as JSON values: input.resource.attributes,
	// absent when empty. The decision API bounds their size.
	Attributes map[string]any `json:"attributes,omitempty"`
}

// Tenant is input.tenant.
type Tenant struct {
	ID   string `json:"id"`
	Plan string `json:"plan"`
}

// Request is input.request.
type Request struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Host    string            `json:"host,omitempty"`
	Query   map[string]string `json:"query,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// SourceIP is the address of the client as the proxy saw it (Envoy's
	// downstream peer); never taken from a client-sent header unless
	// sidecar.trust_forwarded_for says so.
	SourceIP string `json:"source_ip,omitempty"`
	// CanonicalPath is Path in the one spelling every variant an upstream
	// serves as the same resource shares (reqpath.Canon): percent-decoded
	// once, dot segments resolved, repeated slashes merged, lower-cased
	// unless envoy.routes_case_sensitive, and a known format suffix
	// (envoy.format_suffixes) cut off the last segment. Policies compare
	// it rather than Path, which "/API/export.json" spells differently
	// from "/api/export". The engine sets it from Path on every
	// authorization; what a caller puts here is replaced.
	CanonicalPath string `json:"canonical_path"`
	// Format is the format suffix cut off CanonicalPath ("json" for
	// "/reports/export.json"), "" when none. The engine sets it with
	// CanonicalPath.
	Format string `json:"format"`
}
