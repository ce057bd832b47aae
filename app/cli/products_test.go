package cli

import (
	"strings"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// products set adds a product, then sets it; products lists them; bad
// input is exit 2 naming the flag or field and writes nothing; with the
// orders module off, or an instance without it, the command says so.
func TestProductsCommand(t *testing.T) {
	_, ns := testenv.Redis(t)
	cfgPath := directConfig(t, ns, "orders: {enabled: true}\n")
	if code, _, errOut := runCLI(t, "migrate", "--config", cfgPath); code != ExitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	if code, out, _ := runCLI(t, "products", "--config", cfgPath); code != ExitOK || !strings.Contains(out, "no products") {
		t.Fatalf("empty list: exit %d: %s", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"products", "set", "tea", "--stock", "5", "--price-cents", "450"}, "created tea: stock 5, price 450 cents"},
		{[]string{"products", "set", "tea", "--stock", "7", "--price-cents", "500"}, "updated tea: stock 7, price 500 cents"},
		{[]string{"products", "set", "cake", "--stock", "1", "--price-cents", "900"}, "created cake"},
	} {
		if code, out, errOut := runCLI(t, append(c.args, "--config", cfgPath)...); code != ExitOK || !strings.Contains(out, c.want) {
			t.Fatalf("%v: exit %d, %s %s", c.args, code, out, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"products", "set", "tea", "--stock", "-1", "--price-cents", "1"}, "stock"},
		{[]string{"products", "set", "tea", "--stock", "1"}, "--price-cents"},
		{[]string{"products", "set", "tea", "--price-cents", "1"}, "--stock"},
		{[]string{"products", "set", strings.Repeat("s", 65), "--stock", "1", "--price-cents", "1"}, "sku"},
		{[]string{"products", "set", "a\x01b", "--stock", "1", "--price-cents", "1"}, "sku: want text"},
		{[]string{"products", "set", "a\uFFFDb", "--stock", "1", "--price-cents", "1"}, "sku: want text"},
		{[]string{"products", "--limit", "0"}, "--limit"},
	} {
		if code, _, errOut := runCLI(t, append(c.args, "--config", cfgPath)...); code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %s; want exit 2 naming %s", c.args, code, errOut, c.want)
		}
	}
	code, out, _ := runCLI(t, "products", "--json", "--config", cfgPath)
	if code != ExitOK || !strings.Contains(out, `"sku": "cake"`) || !strings.Contains(out, `"stock": 7`) || strings.Index(out, "cake") > strings.Index(out, "tea") {
		t.Fatalf("list: exit %d: %s", code, out)
	}

	off := directConfig(t, ns, "")
	if code, _, errOut := runCLI(t, "products", "--config", off); code == ExitOK || !strings.Contains(errOut, "orders module is off") {
		t.Errorf("orders off: exit %d, %s", code, errOut)
	}
	rdb, ns2 := testenv.Redis(t)
	l, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns2})
	if err != nil {
		t.Fatal(err)
	}
	api := apiInstance(t, httpapi.Deps{Queue: q, Ledger: l})
	if code, _, errOut := runCLI(t, "products", "--api", api); code == ExitOK || !strings.Contains(errOut, "does not run the orders module") {
		t.Errorf("instance without orders: exit %d, %s", code, errOut)
	}
}
