package dataplane_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Outside a topic's lifecycle (internal/dataplane/lifecycle.go, the type
// in queue/lifecycle.go) and the configuration that sets it
// (queue/config.go, package app/config), no code asks which
// durability a topic has: it calls the queue client, whose topic lifecycle
// decides, or asks the client what it needs (WaitsInSQL) (docs/design.md
// §1). Reading the durability to show it, as text
// (string(c.Durability(topic))) and compared with nothing, is the one use
// left to others.
func TestOnlyTheLifecycleKnowsDurability(t *testing.T) {
	allowed := func(path string) bool {
		switch path {
		case "queue/lifecycle.go", "queue/config.go", "internal/dataplane/lifecycle.go", "internal/dataplane/aliases.go":
			return true
		}
		return strings.HasPrefix(path, "app/config/")
	}
	var found []string
	files := 0
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", path)
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
		files++
		dir := filepath.ToSlash(filepath.Dir(rel))
		found = append(found, durabilityUses(fset, f, dir == "queue" || dir == "internal/dataplane")...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files: not the repository", files)
	}
	if len(found) > 0 {
		t.Errorf("code outside the topic lifecycle asks which durability a topic has (call the queue client instead):\n%s", strings.Join(found, "\n"))
	}
}

// The check finds each way of asking, and lets a display through.
func TestDurabilityUsesFindsEachWayOfAsking(t *testing.T) {
	src := `package p
func f(q *dataplane.Client, c dataplane.Config) {
	_ = q.IsDurable("t")                              // 1
	_ = dataplane.DurabilityDurable                        // 2
	var d dataplane.Durability                             // 3
	_ = q.Durability("t") == d                         // 4 (and 3 again)
	_ = string(q.Durability("t")) == "durable"         // 5
	_ = q.Config().Durability                          // 6
	_ = c.TopicDurability                              // 7
	show(string(q.Durability("t")))                    // a display: allowed
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := durabilityUses(fset, f, false)
	lines := map[int]bool{}
	for _, g := range got { // "p.go:LINE:COL: what"
		line, _ := strconv.Atoi(strings.Split(g, ":")[1])
		lines[line] = true
	}
	for _, want := range []int{3, 4, 5, 6, 7, 8, 9} {
		if !lines[want] {
			t.Errorf("line %d not found; found %v", want, got)
		}
	}
	if lines[10] {
		t.Errorf("the display on line 10 was flagged: %v", got)
	}
}

// durabilityUses returns where file f asks which durability a topic has:
// the durability's names, the type (a bare Durability in package queue
// itself), a read of a durability (a Durability method or field) other
// than one converted to text, and a text compared with something.
func durabilityUses(fset *token.FileSet, f *ast.File, inQueue bool) []string {
	names := []string{"DurabilityRedis", "DurabilityDurable", "ParseDurability", "TopicDurability", "IsDurable"}
	shown := map[ast.Expr]bool{}    // x in string(x)
	compared := map[ast.Expr]bool{} // operands of == and !=
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "string" && len(n.Args) == 1 {
				shown[n.Args[0]] = true
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				compared[n.X], compared[n.Y] = true, true
			}
		}
		return true
	})
	var found []string
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
			if x, ok := n.X.(*ast.Ident); ok && (x.Name == "queue" || x.Name == "dataplane") && n.Sel.Name == "Durability" {
				report(n, x.Name+".Durability")
			}
			if c, ok := n.X.(*ast.CallExpr); ok && n.Sel.Name == "Durability" {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Config" {
					report(n, "Config().Durability")
				}
			}
		case *ast.CallExpr:
			if s, ok := n.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Durability" && !shown[n] {
				report(n, "a topic's durability read for more than showing it")
			}
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "string" && len(n.Args) == 1 && compared[n] {
				if c, ok := n.Args[0].(*ast.CallExpr); ok {
					if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Durability" {
						report(n, "a topic's durability compared")
					}
				}
			}
		}
		return true
	})
	return found
}
