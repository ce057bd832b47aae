package orderclose

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SeedSKUs inserts the given SKUs, or sets the stock and price of those that
// exist, in one statement (for demos and tests; it ignores their IDs).
func SeedSKUs(ctx context.Context, db *gorm.DB, skus ...SKU) error {
	if len(skus) == 0 {
		return nil
	}
	rows := make([]SKU, len(skus))
	for i, s := range skus {
		if s.SKU == "" || len(s.SKU) > maxSKULen || s.Stock < 0 || s.PriceCents < 0 {
			return fmt.Errorf("orderclose: seed sku %q: want 1-%d bytes, stock and price not negative", s.SKU, maxSKULen)
		}
		rows[i] = SKU{SKU: s.SKU, Stock: s.Stock, PriceCents: s.PriceCents}
	}
	err := db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "sku"}},
		DoUpdates: clause.AssignmentColumns([]string{"stock", "price_cents"}),
	}).Create(&rows).Error
	if err != nil {
		return fmt.Errorf("orderclose: seed %d skus: %w", len(rows), err)
	}
	return nil
}
