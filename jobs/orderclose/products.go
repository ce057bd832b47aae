package orderclose

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/delayq/delayq/internal/httpjson"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Products are the SKUs orders take stock from: the catalogue an operator
// keeps with PUT /v1/products/{sku} or `delayq products set`.

// ErrProductNotFound is returned by Product for a SKU that does not exist.
var ErrProductNotFound = errors.New("no such product")

// MaxProductsPage is the largest page Products returns.
const MaxProductsPage = 1000

// validProduct checks what PutProduct writes, naming the field at fault:
// the API and the CLI, which writes the table directly, refuse alike.
func validProduct(p SKU) error {
	switch {
	case p.SKU == "" || len(p.SKU) > maxSKULen || !utf8.ValidString(p.SKU):
		return &InputError{Field: "sku", Reason: fmt.Sprintf("want 1-%d bytes of UTF-8", maxSKULen)}
	case httpjson.CheckText("sku", p.SKU) != nil:
		// No control characters or U+FFFD: a SKU the API would then refuse
		// everywhere could not be ordered or changed.
		return &InputError{Field: "sku", Reason: "want text: no control characters or U+FFFD"}
	case p.Stock < 0:
		return &InputError{Field: "stock", Reason: fmt.Sprintf("%d: want 0 or more (the units available to new orders)", p.Stock)}
	case p.PriceCents < 0:
		return &InputError{Field: "price_cents", Reason: fmt.Sprintf("%d: want 0 or more (integer cents)", p.PriceCents)}
	}
	return nil
}

// PutProduct creates the product p.SKU, or sets its stock (the units
// available to new orders; pending orders hold theirs apart) and unit
// price, in one statement on db. created says which. Bad input is an
// *InputError naming the field, and writes nothing.
func PutProduct(ctx context.Context, db *gorm.DB, p SKU) (out SKU, created bool, err error) {
	if err := validProduct(p); err != nil {
		return SKU{}, false, err
	}
	db = db.WithContext(ctx)
	err = db.Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&SKU{}).Where("sku = ?", p.SKU).Count(&n).Error; err != nil {
			return err
		}
		created = n == 0
		row := SKU{SKU: p.SKU, Stock: p.Stock, PriceCents: p.PriceCents}
		// The upsert decides, not the count: two creates of one SKU at once
		// both succeed, the second as an update.
		if err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "sku"}},
			DoUpdates: clause.AssignmentColumns([]string{"stock", "price_cents"}),
		}).Create(&row).Error; err != nil {
			return err
		}
		return tx.Where("sku = ?", p.SKU).Take(&out).Error
	})
	if err != nil {
		return SKU{}, false, fmt.Errorf("orderclose: put product %q: %w", p.SKU, err)
	}
	return out, created, nil
}

// Product returns one product; ErrProductNotFound when there is none.
func Product(ctx context.Context, db *gorm.DB, sku string) (SKU, error) {
	var p SKU
	err := db.WithContext(ctx).Where("sku = ?", sku).Take(&p).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return SKU{}, fmt.Errorf("orderclose: product %q: %w", sku, ErrProductNotFound)
	case err != nil:
		return SKU{}, fmt.Errorf("orderclose: product %q: %w", sku, err)
	}
	return p, nil
}

// Products returns up to limit products in SKU order (byte-wise), after
// the SKU after ("" from the start), and the SKU to pass as after for the
// next page ("" on the last one): a keyset page of the unique SKU index.
func Products(ctx context.Context, db *gorm.DB, after string, limit int) ([]SKU, string, error) {
	if limit < 1 || limit > MaxProductsPage {
		return nil, "", &InputError{Field: "limit", Reason: fmt.Sprintf("%d: want 1-%d", limit, MaxProductsPage)}
	}
	q := db.WithContext(ctx).Order("sku").Limit(limit + 1)
	if after != "" {
		q = q.Where("sku > ?", after)
	}
	var rows []SKU
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("orderclose: products: %w", err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[limit-1].SKU
	}
	return rows, next, nil
}

// PutProduct is PutProduct on the service's database.
func (s *Service) PutProduct(ctx context.Context, p SKU) (SKU, bool, error) {
	return PutProduct(ctx, s.db, p)
}

// Product is Product on the service's database.
func (s *Service) Product(ctx context.Context, sku string) (SKU, error) {
	return Product(ctx, s.db, sku)
}

// Products is Products on the service's database.
func (s *Service) Products(ctx context.Context, after string, limit int) ([]SKU, string, error) {
	return Products(ctx, s.db, after, limit)
}
