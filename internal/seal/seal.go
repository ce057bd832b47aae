// Package seal holds the key that opens a value's internal operations to
// delayq's own packages: a method that takes a Key cannot be called from
// outside this module, since no such caller can name the type or make one.
package seal

// Key is the argument of a method meant for delayq's own packages only.
// Its unexported field keeps a struct literal of another module from
// matching it.
type Key struct{ _ struct{ sealed bool } }

// Internal is a value with internal operations behind a Key.
type Internal interface {
	Internal(Key) any
}

// Open returns v's internal operations as T, the interface its caller
// needs. It panics when they do not implement T: a mistake of this
// module's, which its tests catch.
func Open[T any](v Internal) T {
	return v.Internal(Key{}).(T)
}
