package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/authz"
	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// bodyBuffers hold the buffers request bodies are read into and
// decisions rendered into; one grown larger than maxBufferedBody (a body
// near the limit, a large claim set) is left to the collector.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxBufferedBody = 16 << 10

var (
	jsonIn  = protojson.UnmarshalOptions{}
	jsonOut = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
)

// RegisterHTTP mounts the local HTTP JSON API on mux:
//
//	POST /v1/validate-token  ValidateTokenRequest -> ValidateTokenResponse
//	POST /v1/authorize       AuthorizeRequest     -> AuthorizeResponse
//
// A request without a token in its body takes it from an
// "Authorization: Bearer" header, or an API key from an
// "Authorization: ApiKey" or X-Api-Key header; the token field itself
// may hold an API key ("svck_..."). A decision is always 200, allowed or
// not. Errors are JSON {"error":{"code":"...","message":"..."}} with 400
// (malformed request), 405 (not POST), 413 (body over the limit) or 503
// (no decision could be reached).
func (s *Server) RegisterHTTP(mux *http.ServeMux) {
	mux.HandleFunc("POST "+authz.PathValidateToken, s.httpValidateToken)
	mux.HandleFunc("POST "+authz.PathAuthorize, s.httpAuthorize)
	mux.HandleFunc(authz.PathValidateToken, methodNotAllowed)
	mux.HandleFunc(authz.PathAuthorize, methodNotAllowed)
	mux.HandleFunc("POST "+authz.PathPlanResources, s.httpPlanResources)
	mux.HandleFunc(authz.PathPlanResources, methodNotAllowed)
}

// credentialOf is the credential of an API request: the body's token
// (engine.CredentialOf) when it has one, else an API key of r's headers
// (wire.APIKeyFromHeaders), else the bearer token of Authorization.
func credentialOf(r *http.Request, token string) engine.Credential {
	if token != "" {
		return engine.CredentialOf(token)
	}
	auth, hasAuth := r.Header["Authorization"]
	first := ""
	if hasAuth {
		first = auth[0]
	}
	if key := wire.APIKeyFromHeaders(first, hasAuth, r.Header.Get("X-Api-Key")); key != "" {
		return engine.APIKey(key)
	}
	return engine.BearerToken(authz.BearerToken(r))
}

func (s *Server) httpValidateToken(w http.ResponseWriter, r *http.Request) {
	req := &authzv1.ValidateTokenRequest{}
	if !s.readBody(w, r, req) {
		return
	}
	d := tokenDecisionOf(validate(r.Context(), s.d, sourceHTTP, credentialOf(r, req.GetToken())), false)
	writeAnswer(w, func(b []byte) ([]byte, bool) { return appendTokenDecision(b, d) }, d.Proto)
}

func (s *Server) httpAuthorize(w http.ResponseWriter, r *http.Request) {
	req := &authzv1.AuthorizeRequest{}
	if !s.readBody(w, r, req) {
		return
	}
	d, fail := s.decide(r.Context(), sourceHTTP, req, credentialOf(r, req.GetToken()))
	if fail != nil {
		writeError(w, fail.httpStatus(), fail.code, fail.msg)
		return
	}
	writeAnswer(w, func(b []byte) ([]byte, bool) { return appendDecision(b, d) }, d.Proto)
}

// writeAnswer answers 200 with a decision rendered by appendTo
// (appendDecision, appendTokenDecision) into a buffer kept for reuse, or,
// when appendTo leaves the decision alone, with writeProto of its message;
// the bytes are the same.
func writeAnswer[M proto.Message](w http.ResponseWriter, appendTo func([]byte) ([]byte, bool), message func() M) {
	bp := bodyBuffers.Get().(*[]byte)
	b, ok := appendTo((*bp)[:0])
	if ok {
		// Write copies b: a ResponseWriter does not keep it.
		wire.WriteRaw(w, http.StatusOK, append(b, '\n'))
	}
	if cap(b) <= maxBufferedBody {
		*bp = b[:0]
		bodyBuffers.Put(bp)
	}
	if !ok {
		writeProto(w, http.StatusOK, message())
	}
}

// readBody decodes the request body into m, answering the caller itself
// (and returning false) when it cannot. An empty body is an empty message.
//
// The body is read into a buffer kept for reuse: protojson copies what it
// keeps, and so do decodeAuthorizeRequest and decodeValidateTokenRequest,
// which decode the usual requests before protojson is asked to.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	bp := bodyBuffers.Get().(*[]byte)
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.maxBody), (*bp)[:0])
	defer func() {
		if cap(body) <= maxBufferedBody {
			*bp = body[:0]
			bodyBuffers.Put(bp)
		}
	}()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, reason.InputInvalid,
				fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, reason.InputInvalid, "request body could not be read")
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	switch req := m.(type) {
	case *authzv1.AuthorizeRequest:
		if decodeAuthorizeRequest(body, req) {
			return true
		}
	case *authzv1.ValidateTokenRequest:
		if decodeValidateTokenRequest(body, req) {
			return true
		}
	}
	if err := jsonIn.Unmarshal(body, m); err != nil {
		writeError(w, http.StatusBadRequest, reason.InputInvalid,
			fmt.Sprintf("request body is not a valid %s JSON object: %s",
				m.ProtoReflect().Descriptor().Name(), jsonErrorText(err)))
		return false
	}
	return true
}

// readAll is io.ReadAll into b.
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// jsonErrorText keeps protojson's description of what is wrong without its
// "proto:" prefix. protojson quotes at most the offending token; that is
// the caller's own input and it is returned only to the caller, never
// logged.
func jsonErrorText(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "proto:")
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "\u00a0"))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

func methodNotAllowed(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	writeError(w, http.StatusMethodNotAllowed, reason.InputInvalid, "use POST")
}

// writeProto writes m as compact protojson. protojson varies its
// whitespace on purpose; compacting it gives every caller the same bytes.
func writeProto(w http.ResponseWriter, code int, m proto.Message) {
	b, err := jsonOut.Marshal(m)
	if err != nil {
		writeError(w, http.StatusInternalServerError, reason.PolicyError, "response could not be encoded")
		return
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + 1)
	if err := json.Compact(&buf, b); err != nil {
		writeError(w, http.StatusInternalServerError, reason.PolicyError, "response could not be encoded")
		return
	}
	buf.WriteByte('\n')
	wire.WriteRaw(w, code, buf.Bytes())
}

func writeError(w http.ResponseWriter, code int, rc reason.Code, msg string) {
	wire.WriteError(w, code, wire.Compact, string(rc), msg)
}
