package samlgw

import (
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine/config"
)

// CheckFiles reads what New reads from files of cfg's [sdk.saml], with the
// same functions, and reports what New would refuse: the SP key pair, the
// metadata signing certificates, and the IdP metadata file (parsed, and
// verified with those certificates when set). It fetches nothing: the
// metadata URL is fetched by the running gateway, which serves without it
// until it answers. Nil without [sdk.saml].
func CheckFiles(cfg config.Config) error {
	s := cfg.SDK.SAML
	if s == nil {
		return nil
	}
	if _, _, err := loadSPKeyPair(*s); err != nil {
		return err
	}
	m := &metadataSource{file: s.IDPMetadataFile, now: time.Now}
	if f := s.IDPMetadataSigningCertificateFile; f != "" {
		var err error
		if m.trust, err = LoadCertificates(f); err != nil {
			return fmt.Errorf("sdk.saml.idp_metadata_signing_certificate_file: %w", err)
		}
	}
	if s.IDPMetadataFile != "" {
		return m.loadFile()
	}
	return nil
}
