package samlgw

import (
	"context"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	_ "crypto/sha1" // OAEP's default digest and mask generation hash
	_ "crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/beevik/etree"
	"github.com/svc-dev/svc/reason"
)

// XML Encryption namespaces and the algorithms the ACS accepts: RSA-OAEP
// to carry the key, AES-GCM for the assertion. RSA PKCS#1 v1.5 and the
// CBC modes are refused before any key is used: a server that decrypts
// them for anyone is a padding oracle (Bleichenbacher's on the SP key,
// Vaudenay's on CBC), and an unsigned Response is decrypted before any
// signature is checked.
const (
	nsXMLEnc   = "http://www.w3.org/2001/04/xmlenc#"
	nsXMLEnc11 = "http://www.w3.org/2009/xmlenc11#"

	algRSAOAEPMGF1P = nsXMLEnc + "rsa-oaep-mgf1p"
	algRSAOAEP      = nsXMLEnc11 + "rsa-oaep"
)

// dataAlgorithms are the accepted block encryptions, by AES key size.
var dataAlgorithms = map[string]int{
	nsXMLEnc11 + "aes128-gcm": 16,
	nsXMLEnc11 + "aes192-gcm": 24,
	nsXMLEnc11 + "aes256-gcm": 32,
}

// oaepDigests are the accepted OAEP digests. xmldsig#sha256 is no
// registered URI, but the XML encryption libraries of Node (behind
// samlify) and of crewjam/saml write it for SHA-256.
var oaepDigests = map[string]crypto.Hash{
	nsDSig + "sha1":     crypto.SHA1,
	nsXMLEnc + "sha256": crypto.SHA256,
	nsDSig + "sha256":   crypto.SHA256,
	"":                  crypto.SHA1, // no DigestMethod: the default
}

// oaepMGFs are the accepted mask generation functions of xmlenc11#rsa-oaep
// (rsa-oaep-mgf1p is MGF1 with SHA-1 by definition).
var oaepMGFs = map[string]crypto.Hash{
	"":                        crypto.SHA1,
	nsXMLEnc11 + "mgf1sha1":   crypto.SHA1,
	nsXMLEnc11 + "mgf1sha256": crypto.SHA256,
}

// maxEncryptedKeys bounds the keys tried: one per recipient certificate
// an IdP encrypts for.
const maxEncryptedKeys = 4

// errDecryption is the one answer to every failure after the algorithm
// checks: which step failed (the key transport, its length, the
// authenticated decryption, the content) is never told.
var errDecryption = refuse(reason.SAMLDecryptionFailed, "the assertion cannot be decrypted with the SP key")

// encryptedKey is an EncryptedKey whose algorithms passed the checks.
type encryptedKey struct {
	cipher []byte
	opts   rsa.OAEPOptions
}

// decrypt opens an EncryptedAssertion with the SP key. Everything that
// can be checked without the key is checked first (the algorithms, the
// shape, the base64): those refusals tell the sender only what it sent.
// After that every failure is errDecryption, and a key transport that
// fails goes on with a random key, so that a wrong key costs the same
// work as a right one.
func (v *validator) decrypt(ctx context.Context, enc *etree.Element) (*etree.Element, error) {
	priv, ok := v.spKey.(*rsa.PrivateKey)
	if v.spKey == nil {
		return nil, refuse(reason.SAMLMalformed, "encrypted assertion, but no SP private key is configured")
	}
	if !ok {
		return nil, refuse(reason.SAMLMalformed, "encrypted assertion, but the SP key is not an RSA key")
	}
	data := childNS(enc, nsXMLEnc, "EncryptedData")
	if data == nil {
		return nil, refuse(reason.SAMLMalformed, "EncryptedAssertion without exactly one EncryptedData")
	}
	keySize, ciphertext, err := dataMethod(data)
	if err != nil {
		return nil, err
	}
	// The key travels in the EncryptedData's KeyInfo or beside it.
	keyEls := childrenNS(enc, nsXMLEnc, "EncryptedKey")
	if ki := childNS(data, nsDSig, "KeyInfo"); ki != nil {
		keyEls = append(keyEls, childrenNS(ki, nsXMLEnc, "EncryptedKey")...)
	}
	if len(keyEls) == 0 || len(keyEls) > maxEncryptedKeys {
		return nil, refuse(reason.SAMLMalformed, "EncryptedAssertion with %d EncryptedKey elements; 1 to %d are accepted", len(keyEls), maxEncryptedKeys)
	}
	keys := make([]encryptedKey, 0, len(keyEls))
	for _, el := range keyEls {
		k, err := keyMethod(el)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}

	var plain []byte
	for _, k := range keys {
		cek, err := priv.Decrypt(nil, k.cipher, &k.opts)
		if err != nil || len(cek) != keySize {
			cek = make([]byte, keySize)
			_, _ = rand.Read(cek)
		}
		if p, err := openGCM(cek, ciphertext); err == nil {
			plain = p
			break
		}
	}
	if plain == nil {
		return nil, errDecryption
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return decryptedAssertion(ctx, plain)
}

// dataMethod checks the EncryptedData's algorithm and returns its AES key
// size and ciphertext.
func dataMethod(data *etree.Element) (int, []byte, error) {
	alg := ""
	if em := childNS(data, nsXMLEnc, "EncryptionMethod"); em != nil {
		alg = em.SelectAttrValue("Algorithm", "")
	}
	size, ok := dataAlgorithms[alg]
	if !ok {
		return 0, nil, refuse(reason.SAMLAlgorithmNotAllowed, "data encryption method %q is not accepted (AES-GCM: %saes128-gcm, aes192-gcm or aes256-gcm)", clip(alg), nsXMLEnc11)
	}
	ct, err := cipherValue(data, "EncryptedData")
	return size, ct, err
}

// keyMethod checks an EncryptedKey's algorithm, digest and mask
// generation function and returns its ciphertext with the OAEP options.
func keyMethod(el *etree.Element) (encryptedKey, error) {
	em := childNS(el, nsXMLEnc, "EncryptionMethod")
	alg := ""
	if em != nil {
		alg = em.SelectAttrValue("Algorithm", "")
	}
	if alg != algRSAOAEPMGF1P && alg != algRSAOAEP {
		return encryptedKey{}, refuse(reason.SAMLAlgorithmNotAllowed, "key transport method %q is not accepted (RSA-OAEP: %s or %s)", clip(alg), algRSAOAEPMGF1P, algRSAOAEP)
	}
	digest, err := methodParam(em, "DigestMethod")
	if err != nil {
		return encryptedKey{}, err
	}
	h := oaepDigests[digest]
	if h == 0 {
		return encryptedKey{}, refuse(reason.SAMLAlgorithmNotAllowed, "RSA-OAEP digest method %q is not accepted (SHA-1 or SHA-256)", clip(digest))
	}
	mgf := crypto.SHA1
	if alg == algRSAOAEP {
		m, err := methodParam(em, "MGF")
		if err != nil {
			return encryptedKey{}, err
		}
		if mgf = oaepMGFs[m]; mgf == 0 {
			return encryptedKey{}, refuse(reason.SAMLAlgorithmNotAllowed, "RSA-OAEP mask generation function %q is not accepted (MGF1 with SHA-1 or SHA-256)", clip(m))
		}
	}
	if p, err := methodParam(em, "OAEPparams"); err != nil {
		return encryptedKey{}, err
	} else if p != "" {
		return encryptedKey{}, refuse(reason.SAMLAlgorithmNotAllowed, "RSA-OAEP parameters (a label) are not accepted")
	}
	ct, err := cipherValue(el, "EncryptedKey")
	if err != nil {
		return encryptedKey{}, err
	}
	return encryptedKey{cipher: ct, opts: rsa.OAEPOptions{Hash: h, MGFHash: mgf}}, nil
}

// methodParam returns the Algorithm of the one child of EncryptionMethod
// em named local (any namespace: libraries write DigestMethod in the
// XML signature, encryption or no namespace), "" when there is none. For
// OAEPparams it returns the element's text.
func methodParam(em *etree.Element, local string) (string, error) {
	var found *etree.Element
	for _, c := range em.ChildElements() {
		if c.Tag != local {
			continue
		}
		if found != nil {
			return "", refuse(reason.SAMLMalformed, "EncryptionMethod with more than one %s", local)
		}
		found = c
	}
	switch {
	case found == nil:
		return "", nil
	case local == "OAEPparams":
		return strings.TrimSpace(found.Text()), nil
	}
	return found.SelectAttrValue("Algorithm", ""), nil
}

// cipherValue decodes the CipherData/CipherValue of el (a CipherReference
// to fetch is never followed).
func cipherValue(el *etree.Element, what string) ([]byte, error) {
	cd := childNS(el, nsXMLEnc, "CipherData")
	var cv *etree.Element
	if cd != nil {
		cv = childNS(cd, nsXMLEnc, "CipherValue")
	}
	if cv == nil {
		return nil, refuse(reason.SAMLMalformed, "%s without exactly one CipherData/CipherValue", what)
	}
	b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(cv.Text()), ""))
	if err != nil || len(b) == 0 {
		return nil, refuse(reason.SAMLMalformed, "%s CipherValue is not base64", what)
	}
	return b, nil
}

// openGCM decrypts and authenticates an XML Encryption 1.1 AES-GCM
// ciphertext: a 96-bit IV, the ciphertext, a 128-bit tag.
func openGCM(key, ct []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if len(ct) < gcm.NonceSize()+gcm.Overhead() {
		return nil, errDecryption
	}
	return gcm.Open(nil, ct[:gcm.NonceSize()], ct[gcm.NonceSize():], nil)
}

// decryptedAssertion reads the decrypted content: one Assertion, within
// the ACS bounds, nesting no other assertion. Content that is not
// well-formed gets errDecryption, not the parser's words about it.
func decryptedAssertion(ctx context.Context, plain []byte) (*etree.Element, error) {
	if err := scanTokens(ctx, plain, acsLimits); err != nil {
		if CodeOf(err) == reason.SAMLBusy {
			return nil, err
		}
		return nil, errDecryption
	}
	doc := etree.NewDocument()
	doc.ReadSettings.Permissive = false
	if err := doc.ReadFromBytes(plain); err != nil || doc.Root() == nil {
		return nil, errDecryption
	}
	root := doc.Root()
	if root.Tag != "Assertion" || root.NamespaceURI() != nsAssertion {
		return nil, refuse(reason.SAMLMalformed, "decrypted content is not an Assertion")
	}
	nested := 0
	walkNS(root, nil, func(el *etree.Element, ns string) bool {
		if el != root && el.Tag == "Assertion" && ns == nsAssertion {
			nested++
		}
		return true
	})
	if nested > 0 {
		return nil, refuse(reason.SAMLMultipleAssertions, "the decrypted assertion nests another assertion")
	}
	return root, nil
}
