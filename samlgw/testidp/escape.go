package testidp

import (
	"encoding/xml"
	"io"
	"strings"
)

func xmlEscape(w io.Writer, s string) error {
	return xml.EscapeText(w, []byte(strings.ToValidUTF8(s, "\uFFFD")))
}
