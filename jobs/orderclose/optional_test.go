package orderclose_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The orders module is the program's to register: the library (queue,
// ledger, recovery) and app/config, app/httpapi and app/metrics work
// without it, so none of them may import it, directly or not.
func TestOnlyTheProgramImportsTheOrdersModule(t *testing.T) {
	const self = "github.com/delayq/delayq/jobs/orderclose"
	// One line per package: its path, then everything it depends on.
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`,
		"github.com/delayq/delayq/queue/...",
		"github.com/delayq/delayq/ledger/...",
		"github.com/delayq/delayq/recovery/...",
		"github.com/delayq/delayq/app/metrics",
		"github.com/delayq/delayq/app/config",
		"github.com/delayq/delayq/app/httpapi",
	).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 6 {
		t.Fatalf("go list named %d packages, want at least 6:\n%s", len(lines), out)
	}
	for _, line := range lines {
		pkg, deps, _ := strings.Cut(line, " ")
		for _, dep := range strings.Fields(deps) {
			if dep == self {
				t.Errorf("%s imports the orders module (%s)", pkg, self)
			}
		}
	}
}
