package pluginpb

import (
	"reflect"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// Every field survives the round trip: a field added to params.Announcement
// and not to the conversion fails here.
func TestAnnouncementRoundTrip(t *testing.T) {
	in := []params.Announcement{{Name: "n", Title: "t", Tooltip: "tip", Required: true, ItemType: "string",
		CollectionType: params.CollectionMap, String: "s", Array: []string{"a"}, Map: map[string]string{"k": "v"}}}
	v := reflect.ValueOf(in[0])
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			t.Fatalf("field %s is zero in the test value; set it", v.Type().Field(i).Name)
		}
	}
	if got := ToAnnouncements(FromAnnouncements(in)); !reflect.DeepEqual(got, in) {
		t.Errorf("round trip: %+v", got)
	}
}
