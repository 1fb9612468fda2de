package egress

import (
	"net/netip"
	"testing"
)

// The tables confine writes are accepted by this kernel's nftables (checked, not committed).
func TestNFTCheck(t *testing.T) {
	orig := nftCheck
	nftCheck = true
	defer func() { nftCheck = orig }()
	ep := Endpoints{DNS: netip.MustParseAddrPort("10.9.0.1:53"), HTTP: netip.MustParseAddrPort("10.9.0.1:80"), TLS: netip.MustParseAddrPort("10.9.0.1:443"), Proxy: netip.MustParseAddrPort("10.9.0.1:3128"), Direct: netip.MustParseAddrPort("10.9.0.1:3129")}
	if err := confine(t.Context(), "br-test1", netip.MustParseAddr("10.9.0.1"), ep, false); err != nil {
		t.Fatal(err)
	}
	if err := confine(t.Context(), "br-test2", netip.MustParseAddr("10.9.0.1"), ep, true); err != nil {
		t.Fatal(err)
	}
	if err := confine(t.Context(), "br-test3", netip.Addr{}, Endpoints{}, true); err != nil {
		t.Fatal(err)
	}
}
