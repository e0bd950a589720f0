package payment

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Amount is a sum of money in minor units (fen for CNY). Money is never a float.
type Amount int64

// MaxAmount is the largest single payment Alipay accepts: 100,000,000.00 yuan.
const MaxAmount Amount = 100_000_000_00

// Validate reports whether a is a legal payment amount: positive and within MaxAmount.
func (a Amount) Validate() error {
	if a <= 0 {
		return Errorf(EINVALID, "amount must be a positive number of fen, got %d", int64(a))
	}
	if a > MaxAmount {
		return Errorf(EINVALID, "amount %d fen exceeds the maximum of %d fen", int64(a), int64(MaxAmount))
	}
	return nil
}

// Yuan formats a as Alipay's decimal yuan string with exactly two decimals ("9.90").
func (a Amount) Yuan() string {
	v := int64(a)
	sign := ""
	if v < 0 {
		sign = "-"
		if v == math.MinInt64 {
			return "-92233720368547758.08"
		}
		v = -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}

// ParseYuan converts Alipay's decimal yuan string ("9.9", "9.90", "10") to fen exactly,
// without floating point. More than two decimals, signs and exponents are rejected.
func ParseYuan(s string) (Amount, error) {
	if s == "" {
		return 0, Errorf(EINVALID, "empty amount")
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || len(intPart) > 12 || (hasDot && (frac == "" || len(frac) > 2)) {
		return 0, Errorf(EINVALID, "malformed yuan amount %q", s)
	}
	for _, r := range intPart + frac {
		if r < '0' || r > '9' {
			return 0, Errorf(EINVALID, "malformed yuan amount %q", s)
		}
	}
	yuan, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil {
		return 0, Errorf(EINVALID, "malformed yuan amount %q", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	fen, _ := strconv.ParseInt(frac, 10, 64)
	return Amount(yuan*100 + fen), nil
}
