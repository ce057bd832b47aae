package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// strictNumbers is a decode hook that refuses what the weakly typed
// decoder would otherwise turn silently into another number: a fraction
// or an out-of-range value for an integer key (2.5 ran as 2,
// 99999999999999999999 as a negative number), true or false for a number,
// a number for a yes/no key, and a bare number for a duration (30 would
// be 30ns). Strings, which is how environment variables arrive, are
// parsed strictly. What it lets through the decoder converts as before.
func strictNumbers(from, to reflect.Type, v any) (any, error) {
	durationType := reflect.TypeOf(time.Duration(0))
	switch {
	case from == to:
		return v, nil // the defaults, and what is already of its type
	case to == durationType:
		switch from.Kind() {
		case reflect.String:
			s := strings.TrimSpace(v.(string))
			if _, err := time.ParseDuration(s); err != nil {
				return nil, fmt.Errorf("%q: want a duration such as 30s, 500ms or 1h", v)
			}
			return s, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			if reflect.ValueOf(v).IsZero() {
				return v, nil // 0: the default, as an unset key
			}
			return nil, fmt.Errorf("%v: want a duration with its unit, such as 30s or 500ms", v)
		case reflect.Bool:
			return nil, fmt.Errorf("%v: want a duration such as 30s", v)
		}
	case isInt(to.Kind()):
		bits := to.Bits()
		lo, hi := minMax(to.Kind(), bits)
		var f float64
		switch from.Kind() {
		case reflect.Bool:
			return nil, fmt.Errorf("%v: want a whole number", v)
		case reflect.String:
			s := strings.TrimSpace(v.(string))
			if isUint(to.Kind()) {
				n, err := strconv.ParseUint(s, 10, bits)
				if err != nil {
					return nil, fmt.Errorf("%q: want a whole number from 0 to %.0f", v, hi)
				}
				return n, nil
			}
			n, err := strconv.ParseInt(s, 10, bits)
			if err != nil {
				return nil, fmt.Errorf("%q: want a whole number from %.0f to %.0f", v, lo, hi)
			}
			return n, nil
		case reflect.Float32, reflect.Float64:
			f = reflect.ValueOf(v).Float()
			if f != math.Trunc(f) {
				return nil, fmt.Errorf("%v: want a whole number", v)
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f = float64(reflect.ValueOf(v).Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f = float64(reflect.ValueOf(v).Uint())
		default:
			return v, nil
		}
		// hi+1 is a power of two, exact in a float64; hi itself rounds up
		// to it for 64 bits, so the bound is exclusive.
		if f < lo || f >= hi+1 {
			return nil, fmt.Errorf("%v: out of range (want %.0f to %.0f)", v, lo, hi)
		}
	case to.Kind() == reflect.Float32 || to.Kind() == reflect.Float64:
		switch from.Kind() {
		case reflect.Bool:
			return nil, fmt.Errorf("%v: want a number", v)
		case reflect.String:
			f, err := strconv.ParseFloat(strings.TrimSpace(v.(string)), 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("%q: want a number", v)
			}
			return f, nil
		}
	case to.Kind() == reflect.Bool:
		switch from.Kind() {
		case reflect.String:
			b, err := strconv.ParseBool(strings.TrimSpace(v.(string)))
			if err != nil {
				return nil, fmt.Errorf("%q: want true or false", v)
			}
			return b, nil
		case reflect.Bool:
		default:
			return nil, fmt.Errorf("%v: want true or false", v)
		}
	}
	return v, nil
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return isUint(k)
}

func isUint(k reflect.Kind) bool {
	switch k {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// minMax is the range of an integer kind of bits, as float64: exact at
// the limits that matter here (a float64 beyond 2^63 is out either way).
func minMax(k reflect.Kind, bits int) (lo, hi float64) {
	if isUint(k) {
		return 0, math.Ldexp(1, bits) - 1
	}
	return -math.Ldexp(1, bits-1), math.Ldexp(1, bits-1) - 1
}
