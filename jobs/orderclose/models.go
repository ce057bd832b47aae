package orderclose

// Order statuses. An order starts pending_payment and ends either paid or
// closed; both moves are conditional updates from pending_payment, so only
// one of them can ever happen.
const (
	StatusPending = "pending_payment"
	StatusPaid    = "paid"
	StatusClosed  = "closed"
)

// CloseReasonTimeout is the close reason the close job writes.
const CloseReasonTimeout = "payment_timeout"

// The models spell out their column types, as the ledger's do, so that
// Migrate and deployments/mysql/schema.sql create the same tables (a test
// compares them). Times are Unix milliseconds, as everywhere in delayq;
// money is integer cents. Gorm's automatic time tracking is off: it would
// write seconds.

// Order is one row of the orders table.
type Order struct {
	ID      int64  `gorm:"column:id;primaryKey;autoIncrement"`
	OrderNo string `gorm:"column:order_no;type:varchar(64);not null;uniqueIndex"`
	UserID  string `gorm:"column:user_id;type:varchar(64);not null"`
	// AmountCents is the order's total: the sum of quantity x SKU price.
	AmountCents int64  `gorm:"column:amount_cents;type:bigint;not null"`
	Status      string `gorm:"column:status;type:varchar(16);not null;index:,composite:status_deadline,priority:1"`
	CreatedAt   int64  `gorm:"column:created_at;type:bigint;not null;autoCreateTime:false"`
	// PayDeadline is when the order is closed unless paid (Unix ms).
	PayDeadline int64  `gorm:"column:pay_deadline;type:bigint;not null;index:,composite:status_deadline,priority:2"`
	PaidAt      *int64 `gorm:"column:paid_at;type:bigint"`
	ClosedAt    *int64 `gorm:"column:closed_at;type:bigint"`
	CloseReason string `gorm:"column:close_reason;type:varchar(32);not null"`
	// PaymentWindowMs is the payment window the order was created with, in
	// ms; extends move PayDeadline, not it. A retried create with the same
	// idempotency key is compared with it (0 on rows made before it
	// existed: those compare PayDeadline-CreatedAt).
	PaymentWindowMs int64 `gorm:"column:payment_window_ms;type:bigint;not null;default:0"`
	// Version counts the order's changes (1 when created).
	Version int `gorm:"column:version;type:int;size:32;not null"`
	// IdempotencyKey is the key the order was created with (NULL without
	// one). Its unique index is what makes a retried create answer with this
	// order instead of making another; it lives, and is kept, with the row.
	IdempotencyKey *string `gorm:"column:idempotency_key;type:varchar(64);uniqueIndex"`
}

// TableName is "orders".
func (Order) TableName() string { return "orders" }

// OrderItem is one line of an order: the stock it holds.
type OrderItem struct {
	ID       int64  `gorm:"column:id;primaryKey;autoIncrement"`
	OrderNo  string `gorm:"column:order_no;type:varchar(64);not null;uniqueIndex:,composite:order_sku,priority:1"`
	SKU      string `gorm:"column:sku;type:varchar(64);not null;uniqueIndex:,composite:order_sku,priority:2"`
	Quantity int64  `gorm:"column:quantity;type:bigint;not null"`
}

// TableName is "order_items".
func (OrderItem) TableName() string { return "order_items" }

// SKU is a stock-keeping unit with its available stock and unit price.
type SKU struct {
	ID  int64  `gorm:"column:id;primaryKey;autoIncrement"`
	SKU string `gorm:"column:sku;type:varchar(64);not null;uniqueIndex"`
	// Stock is what is available to new orders; orders hold the rest.
	Stock      int64 `gorm:"column:stock;type:bigint;not null;check:chk_skus_stock,stock >= 0"`
	PriceCents int64 `gorm:"column:price_cents;type:bigint;not null"`
}

// TableName is "skus".
func (SKU) TableName() string { return "skus" }

// CloseLog records that an order was closed and its stock given back. Its
// unique key on order_no is what makes a second close a no-op.
type CloseLog struct {
	ID       int64  `gorm:"column:id;primaryKey;autoIncrement"`
	OrderNo  string `gorm:"column:order_no;type:varchar(64);not null;uniqueIndex"`
	ClosedAt int64  `gorm:"column:closed_at;type:bigint;not null"`
	// JobAttempt is the attempt of the close job that closed the order.
	JobAttempt int `gorm:"column:job_attempt;type:int;size:32;not null"`
}

// TableName is "order_close_log".
func (CloseLog) TableName() string { return "order_close_log" }

// Column sizes, checked before writing so that bad input is refused with a
// clear error instead of a truncation error.
const (
	maxOrderNoLen = 64
	maxSKULen     = 64
	maxUserLen    = 64
	// MaxIdempotencyKeyLen is the longest idempotency key, in bytes.
	MaxIdempotencyKeyLen = 64
)
