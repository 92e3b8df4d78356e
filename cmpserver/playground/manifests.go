package playground

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// Card is one generated object as the page shows it.
type Card struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	YAML       string `json:"yaml"`
}

// generateResponse is the kind-specific part of POST /api/generate.
type generateResponse struct {
	Manifests []Card `json:"manifests"`
	// Count is how many objects generate produced; Shown how many are in
	// Manifests, which stops at MaxShownBytes of YAML so that a plugin printing
	// tens of megabytes does not freeze the page.
	Count int `json:"count"`
	Shown int `json:"shown"`
	// Bytes is the size of all objects as JSON, shown or not.
	Bytes     int  `json:"bytes"`
	Truncated bool `json:"truncated"`
}

// cards renders manifests (one JSON object each, as the plugin server returns
// them) as cards, until maxBytes of YAML.
func cards(manifests []string, maxBytes int) generateResponse {
	resp := generateResponse{Manifests: []Card{}, Count: len(manifests)}
	shownBytes := 0
	for _, m := range manifests {
		resp.Bytes += len(m)
		if resp.Truncated {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal([]byte(m), &head) // a non-object still gets a card
		doc, err := yaml.JSONToYAML([]byte(m))
		if err != nil {
			doc = []byte(m)
		}
		if shownBytes+len(doc) > maxBytes {
			resp.Truncated = true
			if resp.Shown > 0 {
				continue
			}
			// A single object above the bound is shown cut.
			doc = append(doc[:maxBytes:maxBytes], fmt.Sprintf("\n# … %d more bytes not shown\n", len(doc)-maxBytes)...)
		}
		shownBytes += len(doc)
		resp.Manifests = append(resp.Manifests, Card{APIVersion: head.APIVersion, Kind: head.Kind,
			Name: head.Metadata.Name, Namespace: head.Metadata.Namespace, YAML: string(doc)})
		resp.Shown++
	}
	return resp
}
