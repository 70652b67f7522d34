package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/beevik/etree"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// samlTarget is a running sidecar with its SAML gateway, trusting a local
// IdP from a metadata file, with an SP key pair for encrypted assertions.
type samlTarget struct {
	s        *harness.Sidecar
	k        *keyring
	idp, sp  *testidp.IdP
	samlAddr string
}

func (g samlTarget) acsURL() string { return "http://" + g.samlAddr + "/auth/saml/acs" }

func startSAMLTarget(t testing.TB, env map[string]string) samlTarget {
	t.Helper()
	idp := generateIdP(t, "https://idp.example.test/saml", "https://idp.example.test/saml/sso")
	sp := keyOnlyIdP(t)
	md := samltest.MetadataFile(t, idp)
	g := samlTarget{k: newKeyring(t), idp: idp, sp: sp, samlAddr: harness.FreeAddr(t)}
	e := map[string]string{
		"SVC_SAML_ADDR":                g.samlAddr,
		"SVC_SAML_ENTITY_ID":           "http://" + g.samlAddr + "/auth/saml/metadata",
		"SVC_SAML_ACS_URL":             g.acsURL(),
		"SVC_SAML_IDP_METADATA_FILE":   md,
		"SVC_SAML_ALLOW_IDP_INITIATED": "true",
		"SVC_SAML_SP_PRIVATE_KEY_PEM":  string(sp.KeyPEM),
		"SVC_SAML_SP_CERTIFICATE_PEM":  string(sp.CertPEM),
		"SVC_LOG_LEVEL":                "warn",
		// Beside sdk.jwks_url (a production configuration)
		// allow_idp_initiated needs the shared replay cache.
		"SVC_REDIS_ADDR": redistest.Start(t),
	}
	for n, v := range env {
		e[n] = v
	}
	g.s = startSidecar(t, g.k, e)
	return g
}

// response is a valid IdP-initiated response for the target.
func (g samlTarget) response() testidp.Response {
	return testidp.Response{
		Destination: g.acsURL(), Recipient: g.acsURL(), Audience: "http://" + g.samlAddr + "/auth/saml/metadata",
		NameID: "alice@example.com",
		Attributes: []testidp.Attribute{
			{Name: "role", Values: []string{"admin"}}, {Name: "tenant_id", Values: []string{"acme"}},
		},
	}
}

// signed is r signed by g's IdP.
func (g samlTarget) signed(t testing.TB, r testidp.Response) []byte {
	t.Helper()
	doc, err := g.idp.Sign(r)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// encrypted is a valid response whose signed assertion is encrypted for
// the SP as e says.
func (g samlTarget) encrypted(t testing.TB, e testidp.Encryption) []byte {
	t.Helper()
	doc := g.signed(t, g.response())
	d := etree.NewDocument()
	if err := d.ReadFromBytes(doc); err != nil {
		t.Fatal(err)
	}
	assertion := d.Root().SelectElement("Assertion")
	plain := etree.NewDocument()
	plain.SetRoot(assertion.Copy())
	pb, err := plain.WriteToBytes()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := testidp.Encrypt(g.sp.Cert, pb, e)
	if err != nil {
		t.Fatal(err)
	}
	wrapper := etree.NewDocument()
	if err := wrapper.ReadFromString(enc); err != nil {
		t.Fatal(err)
	}
	d.Root().InsertChildAt(assertion.Index(), wrapper.Root())
	d.Root().RemoveChild(assertion)
	out, err := d.WriteToBytes()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// acsAnswer is the ACS answer to a JSON client.
type acsAnswer struct {
	status     int
	retryAfter string
	body       []byte
	took       time.Duration
}

func (a acsAnswer) String() string { return fmt.Sprintf("%d %s", a.status, a.body) }

// postAs posts a form body to the ACS from c as a JSON client, with the
// extra headers.
func postAs(c *http.Client, acs, body string, extra http.Header) (acsAnswer, error) {
	req, err := http.NewRequest(http.MethodPost, acs, strings.NewReader(body))
	if err != nil {
		return acsAnswer{}, err
	}
	for k, vs := range extra {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return acsAnswer{}, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return acsAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: bytes.TrimSpace(b.Bytes()), took: time.Since(start)}, err
}

func formOf(doc []byte) string {
	return url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}}.Encode()
}

func (g samlTarget) post(t testing.TB, doc []byte) acsAnswer {
	t.Helper()
	a, err := postAs(&http.Client{Timeout: 30 * time.Second}, g.acsURL(), formOf(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// nestedForm is the review's hostile body: a form of at most size bytes
// whose SAMLResponse nests elements as deep as the size allows.
func nestedForm(size int) string {
	head := `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="r" Version="2.0">`
	n := (size/4*3 - len(head) - 20) / 7
	for {
		body := formOf([]byte(head + strings.Repeat("<a>", n) + strings.Repeat("</a>", n) + "</samlp:Response>"))
		if len(body) <= size {
			return body
		}
		n -= (len(body)-size)/10 + 1
	}
}

// TestSAMLACSAttacksOfTheBinary posts the attacks of the security review
// to a running sidecar's ACS: the 1 MiB nested body is refused at once
// (it cost 35 s of CPU before the bounds), an EncryptedAssertion with RSA
// PKCS#1 v1.5 or AES-CBC is refused before decryption with one answer
// whatever its key ciphertext, and every failed decryption of an OAEP and
// GCM one looks the same; a valid OAEP and GCM one is accepted.
func TestSAMLACSAttacksOfTheBinary(t *testing.T) {
	t.Parallel()
	g := startSAMLTarget(t, nil)

	t.Run("nested 1 MiB", func(t *testing.T) {
		// From an address of its own: its tens of ms of CPU are charged
		// to its client's budget, which the other posts need not share.
		body := nestedForm(1 << 20)
		a, err := postAs(clientFrom(t, "127.0.0.9"), g.acsURL(), body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.status != http.StatusBadRequest || !bytes.Contains(a.body, []byte(`"saml-too-complex"`)) {
			t.Fatalf("%d-byte nested body: %s, want 400 saml-too-complex", len(body), a)
		}
		// Wall-clock time on a shared machine: a generous bound that the
		// quadratic parser (35 s) could never meet.
		if a.took > 3*time.Second {
			t.Errorf("refused after %s", a.took)
		}
		t.Logf("%d-byte nested body refused in %s", len(body), a.took.Round(time.Millisecond))
	})

	t.Run("RSA PKCS#1 v1.5 and CBC refused before decryption", func(t *testing.T) {
		junk := make([]byte, 256)
		_, _ = rand.Read(junk)
		for _, e := range []testidp.Encryption{
			{KeyAlgorithm: testidp.KeyRSA15, DataAlgorithm: testidp.DataAES128GCM},
			{DataAlgorithm: testidp.DataAES256CBC},
		} {
			a := g.post(t, g.encrypted(t, e))
			alg := e.KeyAlgorithm
			if e.DataAlgorithm == testidp.DataAES256CBC {
				alg = e.DataAlgorithm
			}
			if a.status != http.StatusUnauthorized || !bytes.Contains(a.body, []byte(`"saml-algorithm-not-allowed"`)) || !bytes.Contains(a.body, []byte(alg)) {
				t.Errorf("%s: %s, want 401 saml-algorithm-not-allowed naming it", alg, a)
			}
			e.KeyCipher = junk
			if b := g.post(t, g.encrypted(t, e)); b.status != a.status || !bytes.Equal(b.body, a.body) {
				t.Errorf("%s with a random key ciphertext: %s, with a conformant one %s", alg, b, a)
			}
		}
	})

	t.Run("decryption failures look alike", func(t *testing.T) {
		junk := func(n int) []byte {
			b := make([]byte, n)
			_, _ = rand.Read(b)
			return b
		}
		var first acsAnswer
		for name, e := range map[string]testidp.Encryption{
			"random key ciphertext": {KeyCipher: junk(256)},
			"tampered data":         {Data: junk(400)},
			"short data":            {Data: junk(8)},
		} {
			a := g.post(t, g.encrypted(t, e))
			if a.status != http.StatusBadRequest || !bytes.Contains(a.body, []byte(`"saml-decryption-failed"`)) {
				t.Errorf("%s: %s, want 400 saml-decryption-failed", name, a)
			}
			if first.body == nil {
				first = a
			} else if !bytes.Equal(a.body, first.body) {
				t.Errorf("%s answers %s, another failure %s", name, a, first)
			}
		}
	})

	t.Run("RSA-OAEP and AES-GCM accepted", func(t *testing.T) {
		a := g.post(t, g.encrypted(t, testidp.Encryption{KeyAlgorithm: testidp.KeyRSAOAEP, SHA256: true}))
		if a.status != http.StatusOK || !bytes.Contains(a.body, []byte(`"token"`)) {
			t.Fatalf("OAEP and GCM: %s, want 200 with a token", a)
		}
	})
}

// boundsDoc is a Response as costly as the ACS bounds let through: about
// 9,900 elements nested 62 deep under a forged Response signature, so that
// the gateway canonicalizes all of it before the signature fails.
func boundsDoc(g samlTarget) []byte {
	r := g.response()
	r.SignResponse = true
	tmpl := string(g.idp.XML(r, true))
	tmpl = strings.Replace(tmpl, "<ds:DigestValue></ds:DigestValue>", "<ds:DigestValue>"+strings.Repeat("A", 43)+"=</ds:DigestValue>", 1)
	tmpl = strings.Replace(tmpl, "<ds:SignatureValue></ds:SignatureValue>", "<ds:SignatureValue>"+strings.Repeat("A", 342)+"==</ds:SignatureValue>", 1)
	const depth = 62
	var head strings.Builder
	head.WriteString(`<x:a xmlns:x="urn:x"`)
	for i := range 28 {
		fmt.Fprintf(&head, ` xmlns:n%d="urn:n%d"`, i, i)
	}
	head.WriteString(">")
	chain := head.String() + strings.Repeat(`<x:a b="1">`, depth-1) + strings.Repeat("</x:a>", depth)
	var filler strings.Builder
	for n := 0; n+depth <= 9_900; n += depth {
		filler.WriteString(chain)
	}
	at := strings.Index(tmpl, "<samlp:Status>")
	return []byte(tmpl[:at] + filler.String() + tmpl[at:])
}

// TestSAMLACSFloodLeavesChecksAnswering floods a running sidecar's ACS
// (acs_max_concurrent 2) with the costliest documents the bounds let
// through from 12 clients while a caller sends Envoy Checks: the ACS
// answers the excess 503 saml-busy with Retry-After, refuses the rest for
// what they are, and every Check is answered.
func TestSAMLACSFloodLeavesChecksAnswering(t *testing.T) {
	t.Parallel()
	g := startSAMLTarget(t, map[string]string{"SVC_SAML_ACS_MAX_CONCURRENT": "2"})
	body := formOf(boundsDoc(g))
	token := g.k.token(t, "u-1", "acme", "admin")
	if r := envoyCheck(t, g.s, "GET", "/orders/1", token, nil); r.status != http.StatusOK {
		t.Fatalf("Check before the flood: %d %s", r.status, r.body)
	}

	var busy, refused, other atomic.Int64
	var firstOther atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 30 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := postAs(client, g.acsURL(), body, nil)
				switch {
				case err != nil:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				case a.status == http.StatusServiceUnavailable && bytes.Contains(a.body, []byte(`"saml-busy"`)) && a.retryAfter != "":
					busy.Add(1)
				case a.status == http.StatusUnauthorized && bytes.Contains(a.body, []byte(`"saml-signature-invalid"`)):
					refused.Add(1)
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, a.String())
				}
			}
		}()
	}
	var lat []time.Duration
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		start := time.Now()
		r, err := doCheck(g.s.Conn(t), "GET", "/orders/1", map[string]string{"authorization": "Bearer " + token}, nil)
		if err != nil || r.status != http.StatusOK {
			t.Errorf("Check during the flood: %v %d %s", err, r.status, r.body)
			break
		}
		lat = append(lat, time.Since(start))
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if busy.Load() == 0 {
		t.Errorf("no saml-busy answer among %d refusals of a 12-client flood of a 2-slot ACS", refused.Load())
	}
	if refused.Load() == 0 {
		t.Error("the ACS validated none of the flood")
	}
	if other.Load() != 0 {
		t.Errorf("%d unexpected ACS answers, first %v", other.Load(), firstOther.Load())
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		t.Logf("flood: %d saml-busy, %d refused saml-signature-invalid; %d Checks answered, p50 %s, p99 %s, max %s",
			busy.Load(), refused.Load(), len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	}
}

// TestSAMLEncryptedAssertionFromSamlify signs in through samlify with the
// assertion encrypted for the SP certificate of svc's metadata: with
// RSA-OAEP and AES-256-GCM it is accepted; with samlify's default data
// encryption, AES-256-CBC, it is refused before decryption, naming the
// algorithm.
func TestSAMLEncryptedAssertionFromSamlify(t *testing.T) {
	t.Parallel()
	key := keyOnlyIdP(t)
	sp := keyOnlyIdP(t)
	for _, tc := range []struct {
		mode, want string
	}{
		{"gcm", ""},
		{"cbc", "saml-algorithm-not-allowed"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			samlAddr := harness.FreeAddr(t)
			idp := harness.StartSAMLIdPArgs(t, key.KeyPEM, key.CertPEM, "http://"+samlAddr+"/auth/saml/metadata", "--encrypt", tc.mode)
			s := samlSetup{idp: idp, samlAddr: samlAddr}
			harness.StartSidecar(t, harness.SidecarOptions{Env: s.env(samlAddr, true, map[string]string{
				"SVC_SAML_SP_PRIVATE_KEY_PEM": string(sp.KeyPEM),
				"SVC_SAML_SP_CERTIFICATE_PEM": string(sp.CertPEM),
			})})
			ans := askIdP(t, idp.BaseURL+"/idp-initiated?user=alice&relay_state=/orders")
			raw, err := base64.StdEncoding.DecodeString(ans.SAMLResponse)
			if err != nil || !bytes.Contains(raw, []byte("EncryptedAssertion")) {
				t.Fatalf("samlify sent no EncryptedAssertion (%v)", err)
			}
			resp := postACS(t, samlAddr, ans)
			switch got := refusalCode(t, resp); {
			case tc.want == "" && (resp.StatusCode != http.StatusSeeOther || sessionCookie(resp) == ""):
				t.Fatalf("encrypted with %s: %d %q, want 303 with a session", tc.mode, resp.StatusCode, got)
			case tc.want != "" && got != tc.want:
				t.Fatalf("encrypted with %s: %d %q, want %s", tc.mode, resp.StatusCode, got, tc.want)
			}
		})
	}
}
