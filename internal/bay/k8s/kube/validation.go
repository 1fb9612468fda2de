package kube

import (
	"regexp"
	"slices"
	"strings"
)

// Kubernetes' rules for names, label keys and label values. Each check returns the reasons a
// value breaks the rule, none when it holds.

var (
	dns1123LabelRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123SubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	qualifiedNameRE    = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	labelValueRE       = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// IsDNS1123Label: a namespace's name, at most 63 lowercase letters, digits and '-'.
func IsDNS1123Label(v string) []string {
	var errs []string
	if len(v) > 63 {
		errs = append(errs, "must be no more than 63 characters")
	}
	if !dns1123LabelRE.MatchString(v) {
		errs = append(errs, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character")
	}
	return errs
}

// IsDNS1123Subdomain: most objects' names, at most 253 characters of such labels joined by
// '.'.
func IsDNS1123Subdomain(v string) []string {
	var errs []string
	if len(v) > 253 {
		errs = append(errs, "must be no more than 253 characters")
	}
	if !dns1123SubdomainRE.MatchString(v) {
		errs = append(errs, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
	}
	return errs
}

// IsQualifiedName: a label key, an optional DNS subdomain prefix and '/', then a name of at
// most 63 alphanumerics, '-', '_' and '.', starting and ending alphanumeric.
func IsQualifiedName(v string) []string {
	var errs []string
	name := v
	if prefix, rest, ok := strings.Cut(v, "/"); ok {
		if prefix == "" {
			errs = append(errs, "prefix part must be non-empty")
		} else {
			errs = append(errs, prefixed("prefix part ", IsDNS1123Subdomain(prefix))...)
		}
		name = rest
		if strings.Contains(rest, "/") {
			return append(errs, "a qualified name has at most one '/'")
		}
	}
	switch {
	case name == "":
		errs = append(errs, "name part must be non-empty")
	case len(name) > 63:
		errs = append(errs, "name part must be no more than 63 characters")
	}
	if !qualifiedNameRE.MatchString(name) {
		errs = append(errs, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
	}
	return errs
}

// IsValidLabelValue: empty, or at most 63 alphanumerics, '-', '_' and '.', starting and ending
// alphanumeric.
func IsValidLabelValue(v string) []string {
	var errs []string
	if len(v) > 63 {
		errs = append(errs, "must be no more than 63 characters")
	}
	if !labelValueRE.MatchString(v) {
		errs = append(errs, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
	}
	return errs
}

func prefixed(p string, msgs []string) []string {
	for i, m := range msgs {
		msgs[i] = p + m
	}
	return msgs
}

// SelectorFromSet is the label selector of objects carrying every label of set (keys and
// values valid already), in the API's notation: "k1=v1,k2=v2", keys sorted.
func SelectorFromSet(set map[string]string) string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + set[k])
	}
	return b.String()
}

// NameSelector is the field selector of the object named name.
func NameSelector(name string) string {
	// A field selector's value escapes '\', ',' and '='.
	return "metadata.name=" + strings.NewReplacer(`\`, `\\`, `,`, `\,`, `=`, `\=`).Replace(name)
}
