package kube

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Quantity is a resource amount in Kubernetes' notation: a decimal number and a suffix, binary
// (Ki, Mi, Gi, Ti, Pi, Ei), decimal (n, u, m, k, M, G, T, P, E, or none) or an exponent (e3,
// E-2). It is kept as written; the API server stores its canonical form.
type Quantity string

var binarySuffixes = []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}

// NewQuantity is v (bytes) in the largest binary suffix that divides it: 256Mi, 1Gi, 1500.
func NewQuantity(v int64) Quantity {
	suffix := ""
	for _, s := range binarySuffixes {
		if v == 0 || v%1024 != 0 {
			break
		}
		v, suffix = v/1024, s
	}
	return Quantity(strconv.FormatInt(v, 10) + suffix)
}

// NewMilliQuantity is m thousandths (of a CPU): 250m, or 2 for 2000.
func NewMilliQuantity(m int64) Quantity {
	if m%1000 == 0 {
		return Quantity(strconv.FormatInt(m/1000, 10))
	}
	return Quantity(strconv.FormatInt(m, 10) + "m")
}

// ParseQuantity checks s's notation.
func ParseQuantity(s string) (Quantity, error) {
	if _, err := Quantity(s).rat(); err != nil {
		return "", err
	}
	return Quantity(s), nil
}

// rat is the quantity's exact value.
func (q Quantity) rat() (*big.Rat, error) {
	s := string(q)
	// The number: a sign, digits with at most one point, at least one digit.
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits, point := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
			continue
		case c == '.' && !point:
			point = true
			continue
		}
		break
	}
	if digits == 0 {
		return nil, fmt.Errorf("quantity %q: not a number with a unit such as 1Gi or 250m", s)
	}
	num, ok := new(big.Rat).SetString(s[:i])
	if !ok {
		return nil, fmt.Errorf("quantity %q: not a number with a unit such as 1Gi or 250m", s)
	}
	suffix := s[i:]
	factor := new(big.Rat).SetInt64(1)
	switch suffix {
	case "":
	case "Ki", "Mi", "Gi", "Ti", "Pi", "Ei":
		n := strings.Index("KMGTPE", suffix[:1]) + 1
		factor.SetInt(new(big.Int).Lsh(big.NewInt(1), uint(10*n)))
	case "n", "u", "m", "k", "M", "G", "T", "P", "E":
		exp := map[string]int{"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[suffix]
		factor = pow10(exp)
	default:
		if suffix[0] != 'e' && suffix[0] != 'E' {
			return nil, fmt.Errorf("quantity %q: unknown unit %q", s, suffix)
		}
		exp, err := strconv.Atoi(suffix[1:])
		if err != nil || exp < -30 || exp > 30 {
			return nil, fmt.Errorf("quantity %q: bad exponent %q", s, suffix)
		}
		factor = pow10(exp)
	}
	return num.Mul(num, factor), nil
}

func pow10(exp int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(exp, -exp))), nil)
	if exp < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}

// Sign is -1, 0 or 1 (0 also for a malformed quantity).
func (q Quantity) Sign() int {
	r, err := q.rat()
	if err != nil {
		return 0
	}
	return r.Sign()
}

// Value is the quantity rounded up to a whole number (0 for a malformed one), as Kubernetes
// rounds: 1.5 is 2, 100m is 1.
func (q Quantity) Value() int64 { return q.scaled(1) }

// MilliValue is the quantity in thousandths, rounded up.
func (q Quantity) MilliValue() int64 { return q.scaled(1000) }

func (q Quantity) scaled(by int64) int64 {
	r, err := q.rat()
	if err != nil {
		return 0
	}
	r.Mul(r, new(big.Rat).SetInt64(by))
	n, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() {
		if n.Sign() > 0 {
			return 1<<63 - 1
		}
		return -1 << 63
	}
	return n.Int64()
}

// UnmarshalJSON reads a quantity written as a string or as a bare number.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] != '"' {
		s = string(b)
	} else if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s == "null" {
		*q = ""
		return nil
	}
	*q = Quantity(strings.TrimSpace(s))
	return nil
}

// IntOrString is a port given by number or by name.
type IntOrString struct {
	IntVal int32
	StrVal string
	IsStr  bool
}

// FromInt32 is the port number v.
func FromInt32(v int32) IntOrString { return IntOrString{IntVal: v} }

// IntValue is the number (0 for a name).
func (v IntOrString) IntValue() int {
	if v.IsStr {
		n, _ := strconv.Atoi(v.StrVal)
		return n
	}
	return int(v.IntVal)
}

// MarshalJSON writes a number or a string.
func (v IntOrString) MarshalJSON() ([]byte, error) {
	if v.IsStr {
		return json.Marshal(v.StrVal)
	}
	return json.Marshal(v.IntVal)
}

// UnmarshalJSON reads a number or a string.
func (v *IntOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		v.IsStr = true
		return json.Unmarshal(b, &v.StrVal)
	}
	v.IsStr = false
	return json.Unmarshal(b, &v.IntVal)
}
