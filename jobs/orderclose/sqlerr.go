package orderclose

import (
	"errors"

	"gorm.io/gorm"
)

// isDuplicate reports whether err (or an error it wraps) is a unique-key
// violation, on whatever dialect db speaks: the dialector translates its
// driver's error into gorm.ErrDuplicatedKey.
func isDuplicate(db *gorm.DB, err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	tr, ok := db.Dialector.(gorm.ErrorTranslator)
	if !ok {
		return false
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Is(tr.Translate(e), gorm.ErrDuplicatedKey) {
			return true
		}
	}
	return false
}
