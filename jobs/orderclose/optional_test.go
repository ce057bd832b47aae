package orderclose_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The orders module is the program's to register: the library (queue,
// ledger, recovery) and the instrumentation (app/metrics) work without
// it, so none of them may import it.
func TestOnlyTheProgramImportsTheOrdersModule(t *testing.T) {
	const self = "github.com/delayq/delayq/jobs/orderclose"
	for _, pkg := range []string{
		"github.com/delayq/delayq/queue/...",
		"github.com/delayq/delayq/ledger/...",
		"github.com/delayq/delayq/recovery/...",
		"github.com/delayq/delayq/app/metrics",
		"github.com/delayq/delayq/app/config",
		"github.com/delayq/delayq/app/httpapi",
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == self {
				t.Errorf("%s imports the orders module (%s)", pkg, self)
			}
		}
	}
}
