package shipapi

import "testing"

func TestStatusTableCoversEveryCode(t *testing.T) {
	for code, st := range statusOf {
		if st < 400 || StatusOf(code) != st {
			t.Errorf("%s maps to %d", code, st)
		}
	}
	if len(statusOf) != 15 {
		t.Errorf("status table has %d codes; update it with the codes above", len(statusOf))
	}
	if StatusOf("no_such_code") != 500 {
		t.Error("an unknown code is not a 500")
	}
}
