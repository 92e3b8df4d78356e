package pluginpb

import "github.com/cmp-injector/cmp-injector/pkg/params"

// The one conversion between the wire type of a parameter announcement and
// pkg/params's: the server sends with FromAnnouncements, the client reads
// with ToAnnouncements, so a field added to one side cannot be missed on the
// other.

// FromAnnouncements converts announcements to the wire type.
func FromAnnouncements(as []params.Announcement) []*ParameterAnnouncement {
	out := make([]*ParameterAnnouncement, len(as))
	for i, a := range as {
		out[i] = &ParameterAnnouncement{
			Name: a.Name, Title: a.Title, Tooltip: a.Tooltip, Required: a.Required,
			ItemType: a.ItemType, CollectionType: a.CollectionType,
			String_: a.String, Array: a.Array, Map: a.Map,
		}
	}
	return out
}

// ToAnnouncements converts the wire type back.
func ToAnnouncements(ps []*ParameterAnnouncement) []params.Announcement {
	out := make([]params.Announcement, 0, len(ps))
	for _, a := range ps {
		out = append(out, params.Announcement{
			Name: a.GetName(), Title: a.GetTitle(), Tooltip: a.GetTooltip(), Required: a.GetRequired(),
			ItemType: a.GetItemType(), CollectionType: a.GetCollectionType(),
			String: a.GetString_(), Array: a.GetArray(), Map: a.GetMap(),
		})
	}
	return out
}
