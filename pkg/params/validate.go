package params

import (
	"errors"
	"fmt"
)

// ValidateAnnouncement applies the parameterized-CMP rules to one announcement: a
// name is required and collectionType, when set, must be string, array or map.
func ValidateAnnouncement(a Announcement) error {
	if a.Name == "" {
		if a.Title != "" {
			return fmt.Errorf("name is required (entry titled %q)", a.Title)
		}
		return errors.New("name is required")
	}
	switch a.CollectionType {
	case "", collectionString, CollectionArray, CollectionMap:
		return nil
	}
	return fmt.Errorf("parameter %q: unknown collectionType %q (want string, array or map)", a.Name, a.CollectionType)
}

// normalize returns a copy of a that keeps only the value field matching its
// collectionType (an empty collectionType means string), as the proposal's Q/A
// says: the other value fields are ignored, so they are not sent to the UI.
func normalize(a Announcement) Announcement {
	switch a.CollectionType {
	case CollectionArray:
		a.String, a.Map = "", nil
	case CollectionMap:
		a.String, a.Array = "", nil
	default:
		a.Array, a.Map = nil, nil
	}
	return a
}
