// Command cni-loopback is the CNI plugin of the test node's loopback-only runtime handler
// (scripts/k8s/up.sh: the containerd runtime "loopback", RuntimeClass shipyard-loopback): the
// network of a Pod it serves is its loopback interface alone, as a Docker container of network
// "none" has. It creates nothing. containerd's CRI plugin refuses a Pod network that reports
// no address on eth0, so ADD reports the loopback address, attached to no interface (which
// containerd files under eth0); the Pod's IP in the API is then 127.0.0.1, its own loopback.
// containerd brings lo up itself before any configured network.
//
// The Pods of the Kubernetes driver's one-shots in network mode none run on it
// (driver.k8s.no_network_runtime_class).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	switch os.Getenv("CNI_COMMAND") {
	case "ADD":
		conf, err := readConf()
		if err != nil {
			fail("1.0.0", 6, err)
		}
		res := map[string]any{"cniVersion": conf.CNIVersion, "ips": []map[string]string{{"address": "127.0.0.1/8"}}}
		if conf.CNIVersion < "1.0.0" { // 0.3.x and 0.4.0 name the address's family
			res["ips"] = []map[string]string{{"version": "4", "address": "127.0.0.1/8"}}
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
	case "DEL", "CHECK", "STATUS", "GC":
		// Nothing was made: nothing to remove or to check.
	case "VERSION":
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
			"cniVersion": "1.0.0", "supportedVersions": []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"},
		})
	default:
		fail("1.0.0", 4, fmt.Errorf("unknown CNI_COMMAND %q", os.Getenv("CNI_COMMAND")))
	}
}

type netConf struct {
	CNIVersion string `json:"cniVersion"`
}

func readConf() (netConf, error) {
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return netConf{}, err
	}
	var c netConf
	if err := json.Unmarshal(b, &c); err != nil {
		return netConf{}, fmt.Errorf("network configuration: %w", err)
	}
	if c.CNIVersion == "" {
		c.CNIVersion = "0.3.0"
	}
	return c, nil
}

// fail writes a CNI error result and exits 1.
func fail(version string, code int, err error) {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": version, "code": code, "msg": err.Error()})
	os.Exit(1)
}
