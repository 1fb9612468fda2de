package k8s

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// Bay's labels are free-form (an owner name, an RFC 3339 time) while Kubernetes label values
// are at most 63 characters of [A-Za-z0-9._-]. Every object therefore carries:
//   - the labels as Kubernetes labels, for selection: the key with bay's "bay." prefix
//     replaced by the configured one, the value as it is when Kubernetes accepts it, else
//     hashValue of it (selectors encode the wanted value the same way);
//   - the exact labels, JSON in the annotation annLabels, which is what the driver reports.

const (
	// annLabels holds an object's bay labels, exactly, as JSON.
	annLabels = "shipyard.dev/labels"
	// annContainers holds an instance Pod's container list (names, runtime types, ports) in
	// spec order, as JSON.
	annContainers = "shipyard.dev/containers"
	// labelManagedBy marks every object of the driver (not reported as a bay label).
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "shipyard-bay"
	hashedPrefix   = "h-"
)

// labelCodec maps bay label keys and values onto Kubernetes ones.
type labelCodec struct {
	prefix string // "" = keys unchanged; else replaces "bay." (ends in "/" or ".")
}

func newLabelCodec(prefix string) (labelCodec, error) {
	switch {
	case prefix == "" || prefix == "bay":
		return labelCodec{}, nil
	case strings.HasSuffix(prefix, "/"):
		if msgs := kube.IsDNS1123Subdomain(strings.TrimSuffix(prefix, "/")); len(msgs) > 0 {
			return labelCodec{}, fmt.Errorf("label_prefix %q: %s", prefix, strings.Join(msgs, "; "))
		}
		return labelCodec{prefix: prefix}, nil
	default:
		if msgs := kube.IsQualifiedName(prefix + ".x"); len(msgs) > 0 {
			return labelCodec{}, fmt.Errorf("label_prefix %q: %s", prefix, strings.Join(msgs, "; "))
		}
		return labelCodec{prefix: prefix + "."}, nil
	}
}

// key maps a bay label key.
func (c labelCodec) key(k string) string {
	if rest, ok := strings.CutPrefix(k, "bay."); ok && c.prefix != "" {
		return c.prefix + rest
	}
	return k
}

// hashValue stands for a value Kubernetes does not accept as a label value (or one that looks
// like a hash already).
func hashValue(v string) string {
	if len(kube.IsValidLabelValue(v)) == 0 && !strings.HasPrefix(v, hashedPrefix) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return hashedPrefix + hex.EncodeToString(sum[:])[:48]
}

// encode returns the Kubernetes labels of bay labels, or an error naming a key Kubernetes
// cannot carry.
func (c labelCodec) encode(in map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in)+1)
	for k, v := range in {
		kk := c.key(k)
		if msgs := kube.IsQualifiedName(kk); len(msgs) > 0 {
			return nil, fmt.Errorf("label key %q cannot be a Kubernetes label key: %s", k, strings.Join(msgs, "; "))
		}
		out[kk] = hashValue(v)
	}
	out[labelManagedBy] = managedBy
	return out, nil
}

// selector is the label selector of objects carrying all of the bay labels (and the driver's
// managed-by label).
func (c labelCodec) selector(want map[string]string) (string, error) {
	enc, err := c.encode(want)
	if err != nil {
		return "", err
	}
	return kube.SelectorFromSet(enc), nil
}

// annotate writes the exact labels into annotations.
func annotate(ann map[string]string, bayLabels map[string]string) (map[string]string, error) {
	b, err := json.Marshal(bayLabels)
	if err != nil {
		return nil, err
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[annLabels] = string(b)
	return ann, nil
}

// decodeLabels returns an object's bay labels: the annotation's, else (an object made by other
// means) its Kubernetes labels without the driver's own.
func decodeLabels(ann, kl map[string]string) map[string]string {
	if s, ok := ann[annLabels]; ok {
		var out map[string]string
		if json.Unmarshal([]byte(s), &out) == nil {
			return out
		}
	}
	out := maps.Clone(kl)
	delete(out, labelManagedBy)
	return out
}
