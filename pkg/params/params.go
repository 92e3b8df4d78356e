// Package params holds the parameterized-CMP data model: what a plugin announces to
// the UI and what an Application sends back.
package params

// Collection types a parameter announcement may declare. An empty collectionType
// means collectionString.
const (
	collectionString = "string"
	CollectionArray  = "array"
	CollectionMap    = "map"
)

// Announcement is one entry of a plugin's parameter announcement (static in
// plugin.yaml, or printed by the dynamic command). The JSON names are the wire names.
type Announcement struct {
	Name           string            `json:"name,omitempty"`
	Title          string            `json:"title,omitempty"`
	Tooltip        string            `json:"tooltip,omitempty"`
	Required       bool              `json:"required,omitempty"`
	ItemType       string            `json:"itemType,omitempty"`
	CollectionType string            `json:"collectionType,omitempty"`
	String         string            `json:"string,omitempty"`
	Array          []string          `json:"array,omitempty"`
	Map            map[string]string `json:"map,omitempty"`
}

// AppParameter is one entry of an Application's spec.source.plugin.parameters, the
// element type of ARGOCD_APP_PARAMETERS. Field order is alphabetical so that the
// encoded JSON matches Argo CD's key order (array, map, name, string); omitzero keeps
// an explicit empty array or map, as Argo CD does, while dropping absent ones.
type AppParameter struct {
	Array  []string          `json:"array,omitzero"`
	Map    map[string]string `json:"map,omitzero"`
	Name   string            `json:"name"`
	String *string           `json:"string,omitempty"`
}
