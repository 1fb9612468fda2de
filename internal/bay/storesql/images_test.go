package storesql

import (
	"reflect"
	"testing"
)

func TestImagesColumn(t *testing.T) {
	if EncodeImages(nil) != nil || EncodeImages([]map[string]string{}) != nil {
		t.Fatal("no images must be NULL")
	}
	in := []map[string]string{{"image/png": "iVBORw0KGgo="}, {"image/svg+xml": "<svg/>", "text/plain": "<Figure>"}}
	out, err := DecodeImages(EncodeImages(in))
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %v %v", out, err)
	}
	if out, err := DecodeImages(nil); out != nil || err != nil {
		t.Fatalf("NULL: %v %v", out, err)
	}
	bad := "{not json"
	if _, err := DecodeImages(&bad); err == nil {
		t.Fatal("a damaged column must be an error, not silently empty")
	}
}
