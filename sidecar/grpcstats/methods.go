package grpcstats

import (
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	grpccodes "google.golang.org/grpc/codes"

	"github.com/svc-dev/svc/internal/otelhist"
)

// maxMethods bounds the methods whose attributes are kept. Only calls of
// a registered method reach their end, where methods are added, so a
// server has far fewer; a method beyond the bound is recorded with
// attributes built for the call.
const maxMethods = 256

// methodTable holds the attributes of the methods seen so far. Lookups
// read an immutable map without a lock; adding a method copies it.
type methodTable struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string]*methodSets]
	// hist, when set, is the duration histogram in which each method's
	// series are bound.
	hist *otelhist.Histogram
}

// methodSets are a method's span attributes and, per status code, the
// record options of the duration histogram or, with methodTable.hist,
// its series, built once.
type methodSets struct {
	span   []attribute.KeyValue
	byCode [grpccodes.Unauthenticated + 1][]metric.RecordOption
	series [grpccodes.Unauthenticated + 1]*otelhist.Series
}

// lookup returns the method's sets when they were built, else nil.
func (t *methodTable) lookup(fullMethod string) *methodSets {
	if m := t.m.Load(); m != nil {
		return (*m)[fullMethod]
	}
	return nil
}

// get returns the method's sets, building them the first time; nil once
// the table holds maxMethods methods.
func (t *methodTable) get(fullMethod string) *methodSets {
	if ms := t.lookup(fullMethod); ms != nil {
		return ms
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var old map[string]*methodSets
	if p := t.m.Load(); p != nil {
		old = *p
	}
	if ms, ok := old[fullMethod]; ok {
		return ms
	}
	if len(old) >= maxMethods {
		return nil
	}
	ms := newMethodSets(fullMethod, t.hist)
	next := make(map[string]*methodSets, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[fullMethod] = ms
	t.m.Store(&next)
	return ms
}

func newMethodSets(fullMethod string, hist *otelhist.Histogram) *methodSets {
	ms := &methodSets{span: methodAttrs(fullMethod)}
	for c := range ms.byCode {
		if hist != nil {
			ms.series[c] = hist.Bind(durationAttrs(fullMethod, grpccodes.Code(c)))
		} else {
			ms.byCode[c] = recordOptions(fullMethod, grpccodes.Code(c))
		}
	}
	return ms
}

// methodAttrs are the attributes of a call's span and duration that name
// its method: rpc.method ("package.Service/Method") for a well-formed
// full method, and rpc.system.name.
func methodAttrs(fullMethod string) []attribute.KeyValue {
	if len(fullMethod) > 0 && fullMethod[0] == '/' {
		return []attribute.KeyValue{semconv.RPCMethod(fullMethod[1:]), semconv.RPCSystemNameGRPC}
	}
	return []attribute.KeyValue{semconv.RPCSystemNameGRPC}
}

// recordOptions are the record options of a call's duration: the method's
// attributes, rpc.response.status_code and, for a server error,
// error.type.
func recordOptions(fullMethod string, code grpccodes.Code) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(durationAttrs(fullMethod, code))}
}

// durationAttrs are the attributes of a call's duration.
func durationAttrs(fullMethod string, code grpccodes.Code) attribute.Set {
	attrs := append(methodAttrs(fullMethod), semconv.RPCResponseStatusCode(canonicalString(code)))
	if isServerError(code) {
		attrs = append(attrs, semconv.ErrorTypeKey.String(canonicalString(code)))
	}
	return attribute.NewSet(attrs...)
}

// canonicalString is the status code's name in the semantic conventions.
func canonicalString(code grpccodes.Code) string {
	switch code {
	case grpccodes.OK:
		return "OK"
	case grpccodes.Canceled:
		return "CANCELLED"
	case grpccodes.Unknown:
		return "UNKNOWN"
	case grpccodes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case grpccodes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case grpccodes.NotFound:
		return "NOT_FOUND"
	case grpccodes.AlreadyExists:
		return "ALREADY_EXISTS"
	case grpccodes.PermissionDenied:
		return "PERMISSION_DENIED"
	case grpccodes.ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case grpccodes.FailedPrecondition:
		return "FAILED_PRECONDITION"
	case grpccodes.Aborted:
		return "ABORTED"
	case grpccodes.OutOfRange:
		return "OUT_OF_RANGE"
	case grpccodes.Unimplemented:
		return "UNIMPLEMENTED"
	case grpccodes.Internal:
		return "INTERNAL"
	case grpccodes.Unavailable:
		return "UNAVAILABLE"
	case grpccodes.DataLoss:
		return "DATA_LOSS"
	case grpccodes.Unauthenticated:
		return "UNAUTHENTICATED"
	default:
		return "CODE(" + strconv.FormatInt(int64(code), 10) + ")"
	}
}
