package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine/loopback"
)

// DecisionLog is the [decision_log] table: decision records shipped off
// the sidecar through an on-disk spool, beside (and independent of) the
// audit log.
type DecisionLog struct {
	// Sink is "off" (default), "nats", "kafka", "otlp" or "http". Env
	// SVC_DECISION_LOG_SINK.
	Sink string `toml:"sink" yaml:"sink"`
	// URL is where the sink sends: nats://host:port (tls://host:port
	// over TLS) for nats, kafka://host:port[,host:port...] (seed
	// brokers; kafkas:// over TLS) for kafka,
	// https://host/path (uploads to path/logs) for http, and
	// http://host:port or https://host:port (OTLP gRPC) for otlp. Env
	// SVC_DECISION_LOG_URL.
	URL string `toml:"url" yaml:"url"`
	// SpoolDir holds the records until the sink acknowledges them;
	// required with a sink, and private to one sidecar process. Env
	// SVC_DECISION_LOG_SPOOL_DIR.
	SpoolDir string `toml:"spool_dir" yaml:"spool_dir"`
	// SpoolMaxBytes bounds the spool (default 1 GiB). Env
	// SVC_DECISION_LOG_SPOOL_MAX_BYTES.
	SpoolMaxBytes int64 `toml:"spool_max_bytes" yaml:"spool_max_bytes"`
	// Overflow is what a full spool does: "drop_oldest" (default; every
	// drop counted, status degraded) or "deny" (answer 503
	// decision-log-unavailable rather than decide unlogged). Env
	// SVC_DECISION_LOG_OVERFLOW.
	Overflow string `toml:"overflow" yaml:"overflow"`
	// FsyncInterval is how often the spool reaches the disk (default
	// 1s): a power loss loses at most that window; a killed process
	// loses nothing. Env SVC_DECISION_LOG_FSYNC_INTERVAL.
	FsyncInterval Duration `toml:"fsync_interval" yaml:"fsync_interval"`
	// BatchMaxRecords bounds one send to the sink (default 500). Env
	// SVC_DECISION_LOG_BATCH_MAX_RECORDS.
	BatchMaxRecords int `toml:"batch_max_records" yaml:"batch_max_records"`
	// FlushInterval is the longest a record waits for a batch to fill
	// (default 1s). Env SVC_DECISION_LOG_FLUSH_INTERVAL.
	FlushInterval Duration `toml:"flush_interval" yaml:"flush_interval"`
	// Subject is the NATS subject records are published to (default
	// svc.decisions). Env SVC_DECISION_LOG_SUBJECT.
	Subject string `toml:"subject" yaml:"subject"`
	// NATSStream is the JetStream stream that keeps them, created when
	// missing (default SVC_DECISIONS). Env SVC_DECISION_LOG_NATS_STREAM.
	NATSStream string `toml:"nats_stream" yaml:"nats_stream"`
	// NATSDuplicateWindow is the stream's de-duplication window (default
	// 1h), which must outlast a spool backlog so that records sent again
	// are dropped by decision id. Env
	// SVC_DECISION_LOG_NATS_DUPLICATE_WINDOW.
	NATSDuplicateWindow Duration `toml:"nats_duplicate_window" yaml:"nats_duplicate_window"`
	// KafkaTopic is the Kafka topic records are produced to (default
	// svc-decisions); it must exist unless the brokers create topics.
	// Env SVC_DECISION_LOG_KAFKA_TOPIC.
	KafkaTopic string `toml:"kafka_topic" yaml:"kafka_topic"`
	// KafkaSASLMechanism authenticates the producer to the brokers:
	// "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"; empty (default) for
	// none. PLAIN sends the password as it is, so it needs kafkas:// (or
	// a loopback broker). Env SVC_DECISION_LOG_KAFKA_SASL_MECHANISM.
	KafkaSASLMechanism string `toml:"kafka_sasl_mechanism" yaml:"kafka_sasl_mechanism"`
	// KafkaSASLUsername is the SASL user. Env
	// SVC_DECISION_LOG_KAFKA_SASL_USERNAME.
	KafkaSASLUsername string `toml:"kafka_sasl_username" yaml:"kafka_sasl_username"`
	// KafkaSASLPasswordFile holds the SASL user's password, read at
	// startup (one line; whitespace around it ignored); never inline, never logged.
	// Env SVC_DECISION_LOG_KAFKA_SASL_PASSWORD_FILE.
	KafkaSASLPasswordFile string `toml:"kafka_sasl_password_file" yaml:"kafka_sasl_password_file"`
	// TLSCAFile holds PEM certificates of the authorities the sink's
	// TLS server is verified against (kafkas://, NATS tls://, https://
	// for otlp and http) instead of the system's: a private CA. Env
	// SVC_DECISION_LOG_TLS_CA_FILE.
	TLSCAFile string `toml:"tls_ca_file" yaml:"tls_ca_file"`
	// HTTPTokenFile holds a bearer token sent with each upload of the
	// http sink, read at startup. Env SVC_DECISION_LOG_HTTP_TOKEN_FILE.
	HTTPTokenFile string `toml:"http_token_file" yaml:"http_token_file"`
	// IncludeInput puts the redacted policy input in each record as
	// "input" (default true). Without it a record is the audit record
	// alone, which core policy replay skips. Env
	// SVC_DECISION_LOG_INCLUDE_INPUT.
	IncludeInput *bool `toml:"include_input" yaml:"include_input"`
	// Mask lists JSON pointers (RFC 6901) rooted at the record, such as
	// "/input/resource/id" or "/user_id", whose values are
	// erased from every decision record and every audit record (the
	// latter have no input); the pointers that erased something are
	// listed in the record's "erased". Credentials are redacted before
	// the mask runs, whatever it says. No pointer may name
	// "/decision_id", by which consumers de-duplicate records. Env
	// SVC_DECISION_LOG_MASK (comma-separated).
	Mask []string `toml:"mask" yaml:"mask"`
}

// Decision log sinks.
const (
	DecisionLogOff   = "off"
	DecisionLogNATS  = "nats"
	DecisionLogKafka = "kafka"
	DecisionLogOTLP  = "otlp"
	DecisionLogHTTP  = "http"
)

// decisionLogSinks are the values of decision_log.sink.
var decisionLogSinks = []string{DecisionLogOff, DecisionLogNATS, DecisionLogKafka, DecisionLogOTLP, DecisionLogHTTP}

// Kafka SASL mechanisms of decision_log.kafka_sasl_mechanism.
var kafkaSASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Decision log overflow modes.
const (
	DecisionLogDropOldest = "drop_oldest"
	DecisionLogDeny       = "deny"
)

// Defaults of [decision_log].
const (
	DefaultDecisionLogSpoolMaxBytes       = 1 << 30
	DefaultDecisionLogFsyncInterval       = time.Second
	DefaultDecisionLogBatchMaxRecords     = 500
	DefaultDecisionLogFlushInterval       = time.Second
	DefaultDecisionLogSubject             = "svc.decisions"
	DefaultDecisionLogNATSStream          = "SVC_DECISIONS"
	DefaultDecisionLogNATSDuplicateWindow = time.Hour
	DefaultDecisionLogKafkaTopic          = "svc-decisions"
)

// Enabled reports whether decisions are shipped.
func (d DecisionLog) Enabled() bool { return d.Sink != "" && d.Sink != DecisionLogOff }

func (d *DecisionLog) setDefaults() {
	setString(&d.Sink, DecisionLogOff)
	setString(&d.Overflow, DecisionLogDropOldest)
	if d.SpoolMaxBytes == 0 {
		d.SpoolMaxBytes = DefaultDecisionLogSpoolMaxBytes
	}
	setDuration(&d.FsyncInterval, DefaultDecisionLogFsyncInterval)
	if d.BatchMaxRecords == 0 {
		d.BatchMaxRecords = DefaultDecisionLogBatchMaxRecords
	}
	setDuration(&d.FlushInterval, DefaultDecisionLogFlushInterval)
	setString(&d.Subject, DefaultDecisionLogSubject)
	setString(&d.NATSStream, DefaultDecisionLogNATSStream)
	setDuration(&d.NATSDuplicateWindow, DefaultDecisionLogNATSDuplicateWindow)
	setString(&d.KafkaTopic, DefaultDecisionLogKafkaTopic)
	if d.IncludeInput == nil {
		on := true
		d.IncludeInput = &on
	}
}

// IncludesInput reports whether records carry the input (the default).
func (d DecisionLog) IncludesInput() bool { return d.IncludeInput == nil || *d.IncludeInput }

func (v *validator) decisionLog() {
	d := v.c.DecisionLog
	v.decisionLogMask(d)
	switch d.Sink {
	case "", DecisionLogOff:
		return
	case DecisionLogNATS:
		v.decisionLogURL(d, "nats://host:port or tls://host:port", "nats", "tls")
	case DecisionLogKafka:
		if v.decisionLogURL(d, "kafka://host:port[,host:port...] or kafkas:// (TLS)", "kafka", "kafkas") {
			u, _ := url.Parse(d.URL)
			if slices.Contains(strings.Split(u.Host, ","), "") || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				v.fail("decision_log.url", "must be kafka://host:port[,host:port...] or kafkas:// (TLS), got %q", redactURL(d.URL))
			}
		}
		v.kafkaSASL(d)
	case DecisionLogHTTP:
		if v.decisionLogURL(d, "https://host/path or http://host/path", "https", "http") && d.HTTPTokenFile != "" {
			if u, _ := url.Parse(d.URL); u.Scheme == "http" && !loopback.Host(u.Hostname()) {
				v.fail("decision_log.url", "must use https with decision_log.http_token_file (http only on a loopback host): the token would cross the network in clear, got %q", redactURL(d.URL))
			}
		}
	case DecisionLogOTLP:
		v.decisionLogURL(d, "an OTLP gRPC endpoint, http://host:port or https://host:port", "http", "https")
		if u, err := url.Parse(d.URL); err == nil && u.Path != "" && u.Path != "/" {
			v.fail("decision_log.url", "must be an OTLP gRPC endpoint without a path (the OTLP/HTTP path %s is not served over gRPC), got %q", u.Path, redactURL(d.URL))
		}
	default:
		v.fail("decision_log.sink", "must be one of %s, got %q", quotedList(decisionLogSinks), d.Sink)
		return
	}
	if d.SpoolDir == "" {
		v.fail("decision_log.spool_dir", "decision_log.sink = %q needs a spool_dir: records wait there until the sink acknowledges them", d.Sink)
	}
	if d.Overflow != DecisionLogDropOldest && d.Overflow != DecisionLogDeny {
		v.fail("decision_log.overflow", "must be %q or %q, got %q", DecisionLogDropOldest, DecisionLogDeny, d.Overflow)
	}
	if d.SpoolMaxBytes < 1<<20 {
		v.fail("decision_log.spool_max_bytes", "must be at least 1 MiB (1048576), got %d", d.SpoolMaxBytes)
	}
	if d.BatchMaxRecords <= 0 {
		v.fail("decision_log.batch_max_records", "must be positive, got %d", d.BatchMaxRecords)
	}
	if d.Subject == "" || strings.ContainsAny(d.Subject, " \t*>") {
		v.fail("decision_log.subject", "must be a NATS subject without spaces or wildcards, got %q", d.Subject)
	}
	if d.NATSStream == "" || strings.ContainsAny(d.NATSStream, " \t.*>/\\") {
		v.fail("decision_log.nats_stream", "must be a stream name without spaces, dots, slashes or wildcards, got %q", d.NATSStream)
	}
	if !kafkaTopic(d.KafkaTopic) {
		v.fail("decision_log.kafka_topic", "must be a Kafka topic name of at most 249 letters, digits, '.', '_' or '-', got %q", d.KafkaTopic)
	}
}

// kafkaSASL checks the decision_log.kafka_sasl_* keys.
func (v *validator) kafkaSASL(d DecisionLog) {
	switch {
	case d.KafkaSASLMechanism == "":
		if d.KafkaSASLUsername != "" || d.KafkaSASLPasswordFile != "" {
			v.fail("decision_log.kafka_sasl_mechanism", "must name a mechanism (%s) when kafka_sasl_username or kafka_sasl_password_file is set", quotedList(kafkaSASLMechanisms))
		}
		return
	case !slices.Contains(kafkaSASLMechanisms, d.KafkaSASLMechanism):
		v.fail("decision_log.kafka_sasl_mechanism", "must be %s, got %q", quotedList(kafkaSASLMechanisms), d.KafkaSASLMechanism)
		return
	}
	if d.KafkaSASLUsername == "" {
		v.fail("decision_log.kafka_sasl_username", "decision_log.kafka_sasl_mechanism = %q needs a username", d.KafkaSASLMechanism)
	}
	if d.KafkaSASLPasswordFile == "" {
		v.fail("decision_log.kafka_sasl_password_file", "decision_log.kafka_sasl_mechanism = %q needs a password file", d.KafkaSASLMechanism)
	}
	if u, err := url.Parse(d.URL); err == nil && d.KafkaSASLMechanism == "PLAIN" && u.Scheme == "kafka" {
		for _, h := range strings.Split(u.Host, ",") {
			if host, _, err := net.SplitHostPort(h); err != nil || !loopback.Host(host) {
				v.fail("decision_log.url", "must be kafkas:// with kafka_sasl_mechanism = \"PLAIN\" (kafka:// only to loopback brokers): the password would cross the network in clear, got %q", redactURL(d.URL))
				return
			}
		}
	}
}

// kafkaTopic reports whether t is a legal Kafka topic name.
func kafkaTopic(t string) bool {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// decisionLogURL checks decision_log.url for a sink whose address is
// shape (for the message) with one of schemes, and reports whether it
// passed.
func (v *validator) decisionLogURL(d DecisionLog, shape string, schemes ...string) bool {
	u, err := url.Parse(d.URL)
	switch {
	case d.URL == "":
		v.fail("decision_log.url", "decision_log.sink = %q needs a url (%s)", d.Sink, shape)
	case err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "":
		v.fail("decision_log.url", "must be %s, got %q", shape, redactURL(d.URL))
	case u.User != nil:
		v.fail("decision_log.url", "must not carry credentials: secrets are never inline in the configuration")
	default:
		return true
	}
	return false
}

// quotedList is "a", "b" or "c".
func quotedList(vs []string) string {
	q := make([]string, len(vs))
	for i, s := range vs {
		q[i] = strconv.Quote(s)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// redactURL is u without anything that could be a secret (userinfo,
// query), for an error message.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	p.User, p.RawQuery = nil, ""
	return p.String()
}

// decisionLogEnv are the SVC_DECISION_LOG_* variables.
func decisionLogEnv() []EnvVar {
	d := func(c *Config) *DecisionLog { return &c.DecisionLog }
	return []EnvVar{
		{Name: "SVC_DECISION_LOG_SINK", Key: "decision_log.sink",
			Help:  `Where decision records are shipped: "off" (default), "nats", "kafka", "otlp" or "http".`,
			apply: func(c *Config, v string) string { d(c).Sink = v; return "" }},
		{Name: "SVC_DECISION_LOG_URL", Key: "decision_log.url",
			Help:  "The decision log sink's address: nats://host:port (tls:// over TLS); kafka://host:port[,host:port...] (kafkas:// over TLS); for otlp, http(s)://host:4317 (OTLP gRPC); for http, https://host/path.",
			apply: func(c *Config, v string) string { d(c).URL = v; return "" }},
		{Name: "SVC_DECISION_LOG_SPOOL_DIR", Key: "decision_log.spool_dir",
			Help:  "Directory where decision records wait until the sink acknowledges them.",
			apply: func(c *Config, v string) string { d(c).SpoolDir = v; return "" }},
		{Name: "SVC_DECISION_LOG_SPOOL_MAX_BYTES", Key: "decision_log.spool_max_bytes",
			Help: "Most bytes the decision log spool holds. Default 1 GiB.",
			apply: func(c *Config, v string) string {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n <= 0 {
					return "must be a positive number of bytes, got " + strconv.Quote(v)
				}
				d(c).SpoolMaxBytes = n
				return ""
			}},
		{Name: "SVC_DECISION_LOG_OVERFLOW", Key: "decision_log.overflow",
			Help:  `What a full spool does: "drop_oldest" (default) or "deny" (503 decision-log-unavailable).`,
			apply: func(c *Config, v string) string { d(c).Overflow = v; return "" }},
		{Name: "SVC_DECISION_LOG_FSYNC_INTERVAL", Key: "decision_log.fsync_interval",
			Help:  `How often the spool is synced to disk; a power loss loses at most that window. Default "1s".`,
			apply: func(c *Config, v string) string { return positiveDuration(&d(c).FsyncInterval, v) }},
		{Name: "SVC_DECISION_LOG_BATCH_MAX_RECORDS", Key: "decision_log.batch_max_records",
			Help: "Most records in one send to the sink. Default 500.",
			apply: func(c *Config, v string) string {
				n, err := strconv.Atoi(v)
				if err != nil || n <= 0 {
					return "must be a positive integer, got " + strconv.Quote(v)
				}
				d(c).BatchMaxRecords = n
				return ""
			}},
		{Name: "SVC_DECISION_LOG_FLUSH_INTERVAL", Key: "decision_log.flush_interval",
			Help:  `Longest a record waits for its batch to fill. Default "1s".`,
			apply: func(c *Config, v string) string { return positiveDuration(&d(c).FlushInterval, v) }},
		{Name: "SVC_DECISION_LOG_SUBJECT", Key: "decision_log.subject",
			Help:  `NATS subject of the records. Default "svc.decisions".`,
			apply: func(c *Config, v string) string { d(c).Subject = v; return "" }},
		{Name: "SVC_DECISION_LOG_NATS_STREAM", Key: "decision_log.nats_stream",
			Help:  `JetStream stream that keeps the records, created when missing. Default "SVC_DECISIONS".`,
			apply: func(c *Config, v string) string { d(c).NATSStream = v; return "" }},
		{Name: "SVC_DECISION_LOG_NATS_DUPLICATE_WINDOW", Key: "decision_log.nats_duplicate_window",
			Help:  `The stream's de-duplication window; it must outlast a spool backlog. Default "1h".`,
			apply: func(c *Config, v string) string { return positiveDuration(&d(c).NATSDuplicateWindow, v) }},
		{Name: "SVC_DECISION_LOG_KAFKA_TOPIC", Key: "decision_log.kafka_topic",
			Help:  `Kafka topic of the records; it must exist unless the brokers create topics. Default "svc-decisions".`,
			apply: func(c *Config, v string) string { d(c).KafkaTopic = v; return "" }},
		{Name: "SVC_DECISION_LOG_KAFKA_SASL_MECHANISM", Key: "decision_log.kafka_sasl_mechanism",
			Help:  `SASL mechanism of the Kafka producer: "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"; none by default.`,
			apply: func(c *Config, v string) string { d(c).KafkaSASLMechanism = v; return "" }},
		{Name: "SVC_DECISION_LOG_KAFKA_SASL_USERNAME", Key: "decision_log.kafka_sasl_username",
			Help:  "SASL user of the Kafka producer.",
			apply: func(c *Config, v string) string { d(c).KafkaSASLUsername = v; return "" }},
		{Name: "SVC_DECISION_LOG_KAFKA_SASL_PASSWORD_FILE", Key: "decision_log.kafka_sasl_password_file",
			Help:  "File holding the SASL password of the Kafka producer.",
			apply: func(c *Config, v string) string { d(c).KafkaSASLPasswordFile = v; return "" }},
		{Name: "SVC_DECISION_LOG_TLS_CA_FILE", Key: "decision_log.tls_ca_file",
			Help:  "PEM file of the authorities the decision log sink's TLS server is verified against, instead of the system's.",
			apply: func(c *Config, v string) string { d(c).TLSCAFile = v; return "" }},
		{Name: "SVC_DECISION_LOG_HTTP_TOKEN_FILE", Key: "decision_log.http_token_file",
			Help:  "File holding a bearer token sent with each upload of the http decision log sink.",
			apply: func(c *Config, v string) string { d(c).HTTPTokenFile = v; return "" }},
		{Name: "SVC_DECISION_LOG_INCLUDE_INPUT", Key: "decision_log.include_input",
			Help: "false leaves the policy input out of decision records. Default true.",
			apply: func(c *Config, v string) string {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return "must be true or false, got " + strconv.Quote(v)
				}
				d(c).IncludeInput = &b
				return ""
			}},
		{Name: "SVC_DECISION_LOG_MASK", Key: "decision_log.mask",
			Help:  `Comma-separated JSON pointers erased from decision and audit records, e.g. "/input/resource/id".`,
			apply: func(c *Config, v string) string { d(c).Mask = commaList(v); return "" }},
	}
}

func positiveDuration(p *Duration, v string) string {
	dur, err := time.ParseDuration(v)
	if err != nil || dur <= 0 {
		return fmt.Sprintf("must be a positive duration such as \"1s\", got %q", v)
	}
	*p = Duration{dur}
	return ""
}
