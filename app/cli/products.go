package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/apiclient"
	"github.com/delayq/delayq/jobs/orderclose"
)

// productsCmd is `delayq products`: the orders module's catalogue, listed
// or set (PUT /v1/products/{sku} through an API, the skus table directly).
func (a *app) productsCmd() *cobra.Command {
	var after string
	var limit int
	cmd := &cobra.Command{
		Use:   "products",
		Short: "List the orders module's products (SKU, stock, price); products set adds or changes one",
		Example: `  delayq products
  delayq products set tea --stock 100 --price-cents 450`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > orderclose.MaxProductsPage {
				return usageError{fmt.Errorf("--limit %d: want 1-%d", limit, orderclose.MaxProductsPage)}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := s.Products(cmd.Context(), after, limit)
			if err != nil {
				return err
			}
			return a.emit(p, func(w io.Writer) {
				if len(p.Products) == 0 && after == "" {
					fmt.Fprintln(w, "no products: add one with `delayq products set SKU --stock N --price-cents P`")
					return
				}
				row(w, "SKU", "STOCK", "PRICE (CENTS)")
				for _, v := range p.Products {
					row(w, v.SKU, v.Stock, v.PriceCents)
				}
				if p.NextAfter != "" {
					fmt.Fprintf(w, "(more: --after %s)\n", p.NextAfter)
				}
			})
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "list the products after this SKU (a page's next)")
	cmd.Flags().IntVar(&limit, "limit", 100, "the most products to list")

	var stock, price int64
	set := &cobra.Command{
		Use:     "set SKU --stock N --price-cents P",
		Short:   "Add a product, or set its stock (units available to new orders) and unit price",
		Example: `  delayq products set tea --stock 100 --price-cents 450`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			for _, f := range []string{"stock", "price-cents"} {
				if !cmd.Flags().Changed(f) {
					return usageError{fmt.Errorf("missing --%s (usage: products set SKU --stock N --price-cents P)", f)}
				}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.PutProduct(cmd.Context(), argv[0], stock, price)
			if err != nil {
				return err
			}
			return a.emit(v, func(w io.Writer) {
				verb := "updated"
				if v.Created != nil && *v.Created {
					verb = "created"
				}
				fmt.Fprintf(w, "%s %s: stock %d, price %d cents\n", verb, v.SKU, v.Stock, v.PriceCents)
			})
		},
	}
	set.Flags().Int64Var(&stock, "stock", 0, "units available to new orders (0 or more)")
	set.Flags().Int64Var(&price, "price-cents", 0, "unit price in integer cents (0 or more)")
	cmd.AddCommand(set)
	return cmd
}

// errOrdersOff is the answer where the orders module is off.
var errOrdersOff = errors.New("the orders module is off here (orders.enabled: false): there are no products; turn it on in the configuration (delayq demo has it on)")

// Products lists the products from the skus table.
func (s *directStore) Products(ctx context.Context, after string, limit int) (orderclose.ProductPage, error) {
	if !s.cfg.Orders.Enabled {
		return orderclose.ProductPage{}, errOrdersOff
	}
	rows, next, err := orderclose.Products(ctx, ordersLedger(s.b).DB(), after, limit)
	if err != nil {
		return orderclose.ProductPage{}, productError(err)
	}
	out := orderclose.ProductPage{Products: make([]orderclose.ProductView, len(rows)), NextAfter: next}
	for i, p := range rows {
		out.Products[i] = orderclose.ProductView{SKU: p.SKU, Stock: p.Stock, PriceCents: p.PriceCents}
	}
	return out, nil
}

// PutProduct creates or sets a product in the skus table.
func (s *directStore) PutProduct(ctx context.Context, sku string, stock, priceCents int64) (orderclose.ProductView, error) {
	if !s.cfg.Orders.Enabled {
		return orderclose.ProductView{}, errOrdersOff
	}
	p, created, err := orderclose.PutProduct(ctx, ordersLedger(s.b).DB(), orderclose.SKU{SKU: sku, Stock: stock, PriceCents: priceCents})
	if err != nil {
		return orderclose.ProductView{}, productError(err)
	}
	return orderclose.ProductView{SKU: p.SKU, Stock: p.Stock, PriceCents: p.PriceCents, Created: &created}, nil
}

// productError makes bad input the command's usage error (exit 2).
func productError(err error) error {
	var in *orderclose.InputError
	if errors.As(err, &in) {
		return usageError{fmt.Errorf("%s: %s", in.Field, in.Reason)}
	}
	return err
}

// Products lists the instance's products.
func (s *apiStore) Products(ctx context.Context, after string, limit int) (orderclose.ProductPage, error) {
	p, err := s.c.Products(ctx, after, limit)
	return p, s.explainProducts(err)
}

// PutProduct creates or sets a product through the instance's API.
func (s *apiStore) PutProduct(ctx context.Context, sku string, stock, priceCents int64) (orderclose.ProductView, error) {
	v, err := s.c.PutProduct(ctx, sku, stock, priceCents)
	return v, s.explainProducts(err)
}

// explainProducts says that an instance without the orders module has no
// products route, instead of its bare 404.
func (s *apiStore) explainProducts(err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound && ae.Field == "" {
		return fmt.Errorf("the instance at %s does not run the orders module (orders.enabled): there are no products", s.c.BaseURL())
	}
	return s.explain(err)
}
