package config_test

import (
	"fmt"

	"github.com/svc-dev/svc/engine/config"
)

func ExampleParse() {
	_, err := config.Parse([]byte("[sdk]\nfail_mode = \"maybe\"\n"), config.FormatTOML, "svc.toml")
	fmt.Println(err)
	// Output: svc.toml:2: sdk.fail_mode: must be "open" or "closed", got "maybe"
}

func ExampleInspect() {
	rep, err := config.Inspect([]byte("[tenants.AcMe]\nplan = \"pro\"\n"), config.FormatTOML, "svc.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.KeyCount, "keys")
	for _, w := range rep.Warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// 1 keys
	// warning: rate_limit.default_rpm unset: 1000 rpm applies
	// warning: rate_limit.per_tenant.AcMe unset: default 1000 rpm applies
}

// ExampleEnvVars prints the environment variable reference.
func ExampleEnvVars() {
	for _, v := range config.EnvVars() {
		if v.EnvOnly {
			fmt.Printf("%s sets %s (environment only, no file key)\n", v.Name, v.Key)
			continue
		}
		fmt.Printf("%s overrides %s\n", v.Name, v.Key)
	}
	// Output:
	// SVC_SIDECAR_ADDR overrides sdk.sidecar_addr
	// SVC_TENANT_ID overrides sdk.tenant_id
	// SVC_ACCEPTED_TENANTS overrides sdk.accepted_tenants
	// SVC_SERVICE_NAME overrides sdk.service_name
	// SVC_FAIL_MODE overrides sdk.fail_mode
	// SVC_JWKS_URL overrides sdk.jwks_url
	// SVC_DEV_ISSUER_DIR overrides sdk.dev_issuer_dir
	// SVC_API_KEYS_FILE overrides api_keys.file
	// SVC_INTROSPECTION_URL overrides introspection.url
	// SVC_INTROSPECTION_CLIENT_ID overrides introspection.client_id
	// SVC_INTROSPECTION_CLIENT_SECRET_FILE overrides introspection.client_secret_file
	// SVC_INTROSPECTION_TENANT_CLAIM overrides introspection.tenant_claim
	// SVC_INTROSPECTION_CACHE_TTL overrides introspection.cache_ttl
	// SVC_INTROSPECTION_NEGATIVE_CACHE_TTL overrides introspection.negative_cache_ttl
	// SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE overrides identity_token.signing_key_file
	// SVC_IDENTITY_TOKEN_TTL overrides identity_token.ttl
	// SVC_POLICY_DIR overrides policy.dir
	// SVC_BUNDLE_VERIFY_KEY_FILE overrides policy.bundle_verify_key_file
	// SVC_BUNDLE_CACHE_DIR overrides policy.bundle_cache_dir
	// SVC_POLICY_MODE overrides policy.mode
	// SVC_BUNDLE_URL overrides policy.bundle_url
	// SVC_BUNDLE_TOKEN_FILE overrides policy.bundle_token_file
	// SVC_BUNDLE_MAX_AGE overrides policy.bundle_max_age
	// SVC_BUNDLE_MAX_AGE_ACTION overrides policy.bundle_max_age_action
	// SVC_POLICY_ALLOW_NETWORK_BUILTINS overrides policy.allow_network_builtins
	// SVC_POLICY_DRY_RUN_EVAL_TIMEOUT overrides policy.dry_run_eval_timeout
	// SVC_POLICY_BUNDLE_MAX_BYTES overrides policy.bundle_max_bytes
	// SVC_POLICY_DECISION_CACHE_SIZE overrides policy.decision_cache_size
	// SVC_LOG_LEVEL overrides log.level
	// SVC_JWT_ISSUER overrides jwt.issuer
	// SVC_JWT_ISSUER_URL overrides jwt.issuer_url
	// SVC_JWT_AUDIENCES overrides jwt.audiences
	// SVC_JWT_ALLOWED_TYP overrides jwt.allowed_typ
	// SVC_JWT_CACHE_MAX_AGE overrides jwt.cache_max_age
	// SVC_HTTP_ADDR overrides sidecar.http_addr
	// SVC_STATE_DIR overrides sidecar.state_dir
	// SVC_CHECK_PROXY overrides sidecar.check_proxy
	// SVC_TRUST_FORWARDED_FOR overrides sidecar.trust_forwarded_for
	// SVC_TRUSTED_PROXIES overrides sidecar.trusted_proxies
	// SVC_ENVOY_ROUTES_CASE_SENSITIVE overrides envoy.routes_case_sensitive
	// SVC_ENVOY_FORMAT_SUFFIXES overrides envoy.format_suffixes
	// SVC_ADMIN_TOKEN_FILE overrides sidecar.admin_token_file
	// SVC_ADMIN_REQUIRE_TOKEN overrides sidecar.admin_require_token
	// SVC_TLS_CERT_FILE overrides sidecar.tls_cert_file
	// SVC_TLS_KEY_FILE overrides sidecar.tls_key_file
	// SVC_TLS_CLIENT_CA_FILE overrides sidecar.tls_client_ca_file
	// SVC_SOCKET_MODE overrides sidecar.socket_mode
	// SVC_PUBLIC_READ overrides sidecar.public_read
	// SVC_AUDIT_DESTINATION overrides audit.destination
	// SVC_AUDIT_MAX_SIZE_MB overrides audit.max_size_mb
	// SVC_AUDIT_MAX_BACKUPS overrides audit.max_backups
	// SVC_RATE_LIMIT_DEFAULT_RPM overrides rate_limit.default_rpm
	// SVC_REDIS_ADDR overrides rate_limit.redis_addr
	// SVC_REDIS_TIMEOUT overrides rate_limit.redis_timeout
	// SVC_RATE_LIMIT_REDIS_FALLBACK overrides rate_limit.redis_fallback
	// SVC_RATE_LIMIT_REPLICAS overrides rate_limit.replicas
	// SVC_REDIS_TLS overrides rate_limit.redis_tls
	// SVC_REDIS_TLS_CA_FILE overrides rate_limit.redis_tls_ca_file
	// SVC_REDIS_USERNAME overrides rate_limit.redis_username
	// SVC_REDIS_PASSWORD_FILE overrides rate_limit.redis_password_file
	// SVC_SAML_ADDR overrides sidecar.saml_addr
	// SVC_SAML_ENTITY_ID overrides sdk.saml.entity_id
	// SVC_SAML_ACS_URL overrides sdk.saml.acs_url
	// SVC_SAML_IDP_METADATA_URL overrides sdk.saml.idp_metadata_url
	// SVC_SAML_IDP_METADATA_FILE overrides sdk.saml.idp_metadata_file
	// SVC_SAML_IDP_METADATA_SIGNING_CERTIFICATE_FILE overrides sdk.saml.idp_metadata_signing_certificate_file
	// SVC_SAML_CLOCK_SKEW_SECONDS overrides sdk.saml.clock_skew_seconds
	// SVC_SAML_ATTRIBUTE_EMAIL overrides sdk.saml.attribute_mapping.email
	// SVC_SAML_ATTRIBUTE_ROLE overrides sdk.saml.attribute_mapping.role
	// SVC_SAML_ATTRIBUTE_TENANT overrides sdk.saml.attribute_mapping.tenant
	// SVC_SAML_SP_PRIVATE_KEY_FILE overrides sdk.saml.sp_private_key_file
	// SVC_SAML_SP_CERTIFICATE_FILE overrides sdk.saml.sp_certificate_file
	// SVC_SAML_SP_PRIVATE_KEY_PEM sets sdk.saml.sp_private_key_pem (environment only, no file key)
	// SVC_SAML_SP_CERTIFICATE_PEM sets sdk.saml.sp_certificate_pem (environment only, no file key)
	// SVC_SAML_ALLOW_IDP_INITIATED overrides sdk.saml.allow_idp_initiated
	// SVC_SAML_TOKEN_TTL overrides sdk.saml.token_ttl
	// SVC_SAML_ACS_MAX_CONCURRENT overrides sdk.saml.acs_max_concurrent
	// SVC_SAML_ACS_TIMEOUT overrides sdk.saml.acs_timeout
	// SVC_SAML_TOKEN_SIGNING_KEY_FILE overrides sdk.saml.token_signing_key_file
	// SVC_SAML_COOKIE_NAME overrides sdk.saml.cookie_name
	// SVC_SAML_PATH_PREFIX overrides sdk.saml.path_prefix
	// SVC_SAML_BROWSER_REDIRECT overrides sdk.saml.browser_redirect
	// SVC_SAML_DEFAULT_RETURN_TO overrides sdk.saml.default_return_to
	// SVC_SIGNIN_ADDR overrides sidecar.signin_addr
	// SVC_SESSION_COOKIE_NAME overrides sdk.session.cookie_name
	// SVC_SESSION_TOKEN_TTL overrides sdk.session.token_ttl
	// SVC_SESSION_REFRESH_BEFORE overrides sdk.session.refresh_before
	// SVC_SESSION_TOKEN_SIGNING_KEY_FILE overrides sdk.session.token_signing_key_file
	// SVC_SESSION_DEFAULT_RETURN_TO overrides sdk.session.default_return_to
	// SVC_SESSION_BROWSER_REDIRECT overrides sdk.session.browser_redirect
	// SVC_SESSION_ISSUER overrides sdk.session.issuer
	// SVC_OIDC_ISSUER_URL overrides sdk.oidc.issuer_url
	// SVC_OIDC_CLIENT_ID overrides sdk.oidc.client_id
	// SVC_OIDC_CLIENT_SECRET_FILE overrides sdk.oidc.client_secret_file
	// SVC_OIDC_REDIRECT_URL overrides sdk.oidc.redirect_url
	// SVC_OIDC_SCOPES overrides sdk.oidc.scopes
	// SVC_OIDC_CLAIM_TENANT overrides sdk.oidc.claim_mapping.tenant
	// SVC_OIDC_CLAIM_ROLES overrides sdk.oidc.claim_mapping.roles
	// SVC_OIDC_CLAIM_EMAIL overrides sdk.oidc.claim_mapping.email
	// SVC_OIDC_PATH_PREFIX overrides sdk.oidc.path_prefix
	// SVC_DECISION_LOG_SINK overrides decision_log.sink
	// SVC_DECISION_LOG_URL overrides decision_log.url
	// SVC_DECISION_LOG_SPOOL_DIR overrides decision_log.spool_dir
	// SVC_DECISION_LOG_SPOOL_MAX_BYTES overrides decision_log.spool_max_bytes
	// SVC_DECISION_LOG_OVERFLOW overrides decision_log.overflow
	// SVC_DECISION_LOG_FSYNC_INTERVAL overrides decision_log.fsync_interval
	// SVC_DECISION_LOG_BATCH_MAX_RECORDS overrides decision_log.batch_max_records
	// SVC_DECISION_LOG_FLUSH_INTERVAL overrides decision_log.flush_interval
	// SVC_DECISION_LOG_SUBJECT overrides decision_log.subject
	// SVC_DECISION_LOG_NATS_STREAM overrides decision_log.nats_stream
	// SVC_DECISION_LOG_NATS_DUPLICATE_WINDOW overrides decision_log.nats_duplicate_window
	// SVC_DECISION_LOG_KAFKA_TOPIC overrides decision_log.kafka_topic
	// SVC_DECISION_LOG_KAFKA_SASL_MECHANISM overrides decision_log.kafka_sasl_mechanism
	// SVC_DECISION_LOG_KAFKA_SASL_USERNAME overrides decision_log.kafka_sasl_username
	// SVC_DECISION_LOG_KAFKA_SASL_PASSWORD_FILE overrides decision_log.kafka_sasl_password_file
	// SVC_DECISION_LOG_TLS_CA_FILE overrides decision_log.tls_ca_file
	// SVC_DECISION_LOG_HTTP_TOKEN_FILE overrides decision_log.http_token_file
	// SVC_DECISION_LOG_INCLUDE_INPUT overrides decision_log.include_input
	// SVC_DECISION_LOG_MASK overrides decision_log.mask
}
