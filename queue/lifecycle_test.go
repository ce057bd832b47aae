package queue_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Outside a topic's lifecycle (queue/lifecycle.go) and the configuration
// that sets it (queue/config.go, package app/config), no code asks which
// durability a topic has: it calls the queue client, whose topic lifecycle
// decides (docs/design.md §1). Reading the durability to show it, as
// text (string(c.Durability(topic))), is the one use left to others.
func TestOnlyTheLifecycleKnowsDurability(t *testing.T) {
	allowed := func(path string) bool {
		return path == "queue/lifecycle.go" || path == "queue/config.go" || strings.HasPrefix(path, "app/config/")
	}
	// Names that mean a durability: the type, its values and its parser,
	// the per-topic setting, and the old question.
	names := []string{"DurabilityRedis", "DurabilityDurable", "ParseDurability", "TopicDurability", "IsDurable"}
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || allowed(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		inQueue := filepath.ToSlash(filepath.Dir(rel)) == "queue"
		shown := map[ast.Expr]bool{} // calls inside string(...)
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "string" && len(c.Args) == 1 {
					shown[c.Args[0]] = true
				}
			}
			return true
		})
		report := func(n ast.Node, what string) {
			found = append(found, fset.Position(n.Pos()).String()+": "+what)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if slices.Contains(names, n.Name) {
					report(n, n.Name)
				}
				if inQueue && n.Name == "Durability" {
					report(n, "Durability (use the topic's lifecycle)")
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "queue" && n.Sel.Name == "Durability" {
					report(n, "queue.Durability")
				}
			case *ast.CallExpr:
				if s, ok := n.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Durability" && !shown[n] {
					report(n, "a topic's durability read for more than showing it")
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("code outside the topic lifecycle asks which durability a topic has (call the queue client instead):\n%s", strings.Join(found, "\n"))
	}
}
