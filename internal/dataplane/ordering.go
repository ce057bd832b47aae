package dataplane

import "strings"

// parkScore is added to the due score of a job parked behind its ordering
// key's holder (lua/ordering.lua's PARK, 2^51 ms): beyond any claim's
// reach, within a double's exact integers.
const parkScore = 1 << 51

// orderingKeyOf reads an okey field ("ordering key|seq"); "" for none.
func orderingKeyOf(v string) string {
	if i := strings.LastIndexByte(v, '|'); i >= 0 {
		return v[:i]
	}
	return ""
}
