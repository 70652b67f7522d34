package bundle

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// minRSABits is the smallest RSA modulus accepted for signing or
// verifying, as for tokens.
const minRSABits = 2048

// signingKey is a parsed private key with the PEM block OPA's signer reads
// and the algorithm it will sign with.
type signingKey struct {
	pem []byte
	alg string
}

// parseSigningKey finds the private key in pemData (skipping blocks such
// as "EC PARAMETERS" that openssl writes before it), checks that it fits
// alg, and picks the algorithm when alg is empty. Errors never include key
// material.
func parseSigningKey(pemData []byte, alg string) (signingKey, error) {
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return signingKey{}, errors.New("no PEM private key found (want EC PRIVATE KEY, RSA PRIVATE KEY or PRIVATE KEY)")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return signingKey{}, errors.New("encrypted private keys are not supported; decrypt the key first")
		default:
			continue
		}
		if err != nil {
			return signingKey{}, fmt.Errorf("parse %s: %w", block.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return signingKey{}, fmt.Errorf("unsupported private key type %T", key)
		}
		alg, err := algFor(signer.Public(), alg, "")
		if err != nil {
			return signingKey{}, err
		}
		return signingKey{pem: pem.EncodeToMemory(block), alg: alg}, nil
	}
}

// parsePublicKey reads the first public key or certificate of pemData and
// returns it with its PEM block alone, the form OPA's verifier reads. A
// private key is refused: the verifying side should never hold one.
func parsePublicKey(pemData []byte) (crypto.PublicKey, []byte, error) {
	if len(pemData) == 0 {
		return nil, nil, errors.New("no verification key given")
	}
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, nil, errors.New("no PEM public key found (want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE)")
		}
		switch block.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("parse PUBLIC KEY: %w", err)
			}
			return k, pem.EncodeToMemory(block), nil
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(block.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("parse RSA PUBLIC KEY: %w", err)
			}
			return k, pem.EncodeToMemory(block), nil
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("parse CERTIFICATE: %w", err)
			}
			return c.PublicKey, pem.EncodeToMemory(block), nil
		case "EC PRIVATE KEY", "RSA PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
			return nil, nil, errors.New("it is a private key; give the public key instead (openssl pkey -pubout)")
		}
	}
}

// algFor returns the algorithm to use with pub. want, when set, must fit
// the key; otherwise declared (the algorithm a signature names, empty when
// signing) chooses between the algorithms the key fits, and the key's
// default is taken when declared is empty too.
func algFor(pub crypto.PublicKey, want, declared string) (string, error) {
	var fits []string
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("EC key on curve %s is not supported; ES256 needs P-256", k.Curve.Params().Name)
		}
		fits = []string{ES256}
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits {
			return "", fmt.Errorf("RSA key of %d bits is too weak; at least %d are required", bits, minRSABits)
		}
		fits = []string{RS256, PS256}
	default:
		return "", fmt.Errorf("unsupported key type %T; use an EC P-256 or RSA key", pub)
	}
	pick := want
	if pick == "" {
		pick = declared
	}
	if pick == "" {
		return fits[0], nil
	}
	for _, a := range fits {
		if a == pick {
			return a, nil
		}
	}
	return "", fmt.Errorf("algorithm %q does not fit the %s key (want one of %v)", pick, keyKind(pub), fits)
}

func keyKind(pub crypto.PublicKey) string {
	switch pub.(type) {
	case *ecdsa.PublicKey:
		return "EC"
	case *rsa.PublicKey:
		return "RSA"
	default:
		return fmt.Sprintf("%T", pub)
	}
}

// CheckVerifyKey reports why pemData cannot verify bundles (see
// policy.bundle_verify_key_file): no public key or certificate in it, or
// a private key.
func CheckVerifyKey(pemData []byte) error {
	_, _, err := parsePublicKey(pemData)
	return err
}
