package cli

import (
	"fmt"
	"strconv"
)

// decimalInt is an integer flag read in base 10 only: pflag's IntVar
// takes Go's prefixes, so --priority=0x3 and =03 passed as 3 and =010 was
// refused as 8 (an outside probe).
type decimalInt int

func (d *decimalInt) String() string { return strconv.Itoa(int(*d)) }

func (d *decimalInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("%q: want a whole number in base 10", s)
	}
	*d = decimalInt(n)
	return nil
}

func (d *decimalInt) Type() string { return "int" }
