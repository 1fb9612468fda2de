package httpapi_test

import (
	"errors"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
)

func TestPathValidation(t *testing.T) {
	ok := map[string]string{"./a/./b/": "a/b", "a//b": "a/b", "subdir/../file.txt": "file.txt", "a/..": ".", ".hidden": ".hidden", "...file": "...file", "file..txt": "file..txt"}
	for in, want := range ok {
		got, err := httpapi.ValidatePath("path", in)
		if err != nil || got != want {
			t.Errorf("%q -> %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{"": "empty_path", "a\x00b": "null_byte", "/etc": "absolute_path", "//x": "absolute_path", "../x": "path_traversal", "a/../../b": "path_traversal", "./../x": "path_traversal"}
	for in, reason := range bad {
		_, err := httpapi.ValidatePath("cwd", in)
		var be *bay.Error
		if !errors.As(err, &be) || be.Code != bay.CodeInvalidPath || be.Details["reason"] != reason || be.Details["field"] != "cwd" {
			t.Errorf("%q: %v", in, err)
		}
	}
}
