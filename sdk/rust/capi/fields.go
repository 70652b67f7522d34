package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"encoding/binary"
	"math"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/reason"
)

// The token decision as fields (svc_validate_token_fields): a fixed
// header, then the strings one after another. Numbers are in the byte
// order of the machine: the caller runs in the same process.
//
//	offset size
//	0      1    fieldsFormat (an error is a JSON document: '{')
//	1      1    allowed, 0 or 1
//	2      6    zero
//	8      8    claims id: answers with the same id carry the same claim
//	            set, so the caller may reuse what it made of it; 0 when
//	            the claims are null
//	16     4    length of reason
//	20     4    length of subject
//	24     4    length of tenant_id
//	28     4    length of message
//	32     4    length of claims, their JSON
//	36     4    length of decision_id
//	40          reason, subject, tenant_id, message, claims, decision_id
//
// An empty subject, tenant_id, message or decision_id is one the JSON
// answer leaves out. It spares both sides a JSON document on the path of every call:
// the engine copies its strings and the claims' cached encoding, the
// caller reads them at known offsets.
const (
	fieldsFormat = 2
	fieldsHeader = 40
)

// tokenFields is a token decision ready to be laid out.
type tokenFields struct {
	d        engine.TokenDecision
	claimsID uint64
	claims   []byte
}

func (f *tokenFields) strings() [4]string {
	return [4]string{string(f.d.Reason), f.d.Subject, f.d.TenantID, f.d.Message}
}

// size is the length of the layout, or -1 when a part is too long for its
// length field (it cannot be: every part is bounded by the token's size).
func (f *tokenFields) size() int {
	n := fieldsHeader + len(f.claims) + len(f.d.DecisionID)
	if len(f.claims) > math.MaxUint32 || len(f.d.DecisionID) > math.MaxUint32 {
		return -1
	}
	for _, s := range f.strings() {
		if len(s) > math.MaxUint32 {
			return -1
		}
		n += len(s)
	}
	return n
}

// put writes the layout into b, of length f.size().
func (f *tokenFields) put(b []byte) {
	clear(b[:fieldsHeader])
	b[0] = fieldsFormat
	if f.d.Allowed {
		b[1] = 1
	}
	binary.NativeEndian.PutUint64(b[8:], f.claimsID)
	at := fieldsHeader
	for i, s := range f.strings() {
		binary.NativeEndian.PutUint32(b[16+4*i:], uint32(len(s)))
		at += copy(b[at:], s)
	}
	binary.NativeEndian.PutUint32(b[32:], uint32(len(f.claims)))
	at += copy(b[at:], f.claims)
	binary.NativeEndian.PutUint32(b[36:], uint32(len(f.d.DecisionID)))
	copy(b[at:], f.d.DecisionID)
}

// validateFields answers ValidateToken as fields, in buf or malloc'd
// memory (see answer).
func validateFields(h uint64, token string, buf *C.char, capacity C.size_t, big **C.char) C.size_t {
	in, ok := lookup(h)
	if !ok {
		return answer(errorJSON(EngineClosed, "the engine is closed"), buf, capacity, big)
	}
	d := validate(in.eng, token)
	claims, id, err := in.claims.encode(d.Claims)
	if err != nil {
		return answer(errorJSON(reason.InputInvalid, "the token's claims cannot be encoded: "+err.Error()), buf, capacity, big)
	}
	f := tokenFields{d: d, claimsID: id, claims: claims}
	n := f.size()
	if n < 0 {
		return answer(errorJSON(reason.InputInvalid, "the token decision is too large"), buf, capacity, big)
	}
	if dst := answerBuffer(n, buf, capacity, big); dst != nil {
		f.put(dst)
	}
	return C.size_t(n)
}

// svc_validate_token_fields verifies a bearer token as svc_validate_token
// does and answers the token decision as fields (the layout above), or a
// JSON error document (see answer for buf, cap and big).
//
//export svc_validate_token_fields
func svc_validate_token_fields(h C.uint64_t, token *C.char, tokenLen C.size_t, buf *C.char, capacity C.size_t, big **C.char) (n C.size_t) {
	defer recovered("svc_validate_token_fields", func(doc []byte) { n = answer(doc, buf, capacity, big) })
	return validateFields(uint64(h), tokenString(token, tokenLen), buf, capacity, big)
}
