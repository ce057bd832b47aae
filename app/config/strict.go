package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// durationType is time.Duration's type, which decodes from a string.
var durationType = reflect.TypeOf(time.Duration(0))

// strictNumbers is a decode hook that refuses what the weakly typed
// decoder would otherwise turn silently into another number: a fraction
// or an out-of-range value for an integer key (2.5 ran as 2,
// 99999999999999999999 as a negative number), true or false for a number,
// a number for a yes/no key, and a bare number for a duration (30 would
// be 30ns). Strings, which is how environment variables arrive, are
// parsed strictly. What it lets through the decoder converts as before.
// The configuration has signed integers only.
func strictNumbers(from, to reflect.Type, v any) (any, error) {
	if from == to {
		return v, nil // the defaults, and what is already of its type
	}
	rv := reflect.ValueOf(v)
	number := rv.CanInt() || rv.CanUint() || rv.CanFloat()
	isString, isBool := from.Kind() == reflect.String, from.Kind() == reflect.Bool
	switch k := to.Kind(); {
	case to == durationType:
		switch {
		case isString:
			s := strings.TrimSpace(v.(string))
			if _, err := time.ParseDuration(s); err != nil {
				return nil, fmt.Errorf("%q: want a duration such as 30s, 500ms or 1h", v)
			}
			return s, nil
		case number && rv.IsZero():
			return v, nil // 0: the default, as an unset key
		case number || isBool:
			return nil, fmt.Errorf("%v: want a duration with its unit, such as 30s or 500ms", v)
		}
	case k >= reflect.Int && k <= reflect.Int64:
		// 2^(bits-1) is exact in a float64 (its limit less one is not, for
		// 64 bits: the bound is exclusive).
		lim := math.Ldexp(1, to.Bits()-1)
		switch {
		case isString:
			n, err := strconv.ParseInt(strings.TrimSpace(v.(string)), 10, to.Bits())
			if err != nil {
				return nil, fmt.Errorf("%q: want a whole number from %.0f to %.0f", v, -lim, lim-1)
			}
			return n, nil
		case isBool:
			return nil, fmt.Errorf("%v: want a whole number", v)
		case number:
			var f float64
			switch {
			case rv.CanInt():
				f = float64(rv.Int())
			case rv.CanUint():
				f = float64(rv.Uint())
			default:
				f = rv.Float()
			}
			if f != math.Trunc(f) {
				return nil, fmt.Errorf("%v: want a whole number", v)
			}
			if f < -lim || f >= lim {
				return nil, fmt.Errorf("%v: out of range (want %.0f to %.0f)", v, -lim, lim-1)
			}
		}
	case k == reflect.Float32 || k == reflect.Float64:
		switch {
		case isString:
			f, err := strconv.ParseFloat(strings.TrimSpace(v.(string)), 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("%q: want a number", v)
			}
			return f, nil
		case isBool:
			return nil, fmt.Errorf("%v: want a number", v)
		}
	case k == reflect.Bool:
		if isString {
			b, err := strconv.ParseBool(strings.TrimSpace(v.(string)))
			if err != nil {
				return nil, fmt.Errorf("%q: want true or false", v)
			}
			return b, nil
		}
		if !isBool {
			return nil, fmt.Errorf("%v: want true or false", v)
		}
	}
	return v, nil
}
