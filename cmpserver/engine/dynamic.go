package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// parseDynamic reads what a parameters.dynamic command printed. Output Argo
// CD cannot decode fails with Argo CD's text first, the JSON error as its
// json.Unmarshal words it, and our reading after it in parentheses; output
// Argo CD decodes but we refuse (an entry without a name, say) fails with
// ours alone.
func parseDynamic(out []byte) ([]params.Announcement, error) {
	as, ours := params.ParseAnnouncements(out)
	if ours == nil {
		return as, nil
	}
	argo := argoDecodeError(out)
	if argo == "" {
		return nil, ours
	}
	return nil, fmt.Errorf("error unmarshaling dynamic parameter output into ParametersAnnouncementResponse: %s (%w)", argo, ours)
}

// argoDecodeError is the error Argo CD's server gets decoding out, "" when
// it decodes: runCommand drops one trailing newline, then json.Unmarshal into
// []*apiclient.ParameterAnnouncement.
func argoDecodeError(out []byte) string {
	// Argo CD's reposerver/apiclient type as its JSON decoder sees it: the
	// fields of params.Announcement under Argo's Go name, which type errors
	// print ("Go struct field ParameterAnnouncement.required of type bool").
	type ParameterAnnouncement params.Announcement
	var as []*ParameterAnnouncement
	err := json.Unmarshal(bytes.TrimSuffix(out, []byte("\n")), &as)
	if err == nil {
		return ""
	}
	msg := err.Error()
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type != nil {
		// Our package's name where Argo CD's type lives in package apiclient.
		ours := reflect.TypeFor[ParameterAnnouncement]()
		pkg := ours.String()[:strings.LastIndexByte(ours.String(), '.')+1]
		msg = strings.ReplaceAll(msg, pkg+ours.Name(), "apiclient."+ours.Name())
	}
	return msg
}
