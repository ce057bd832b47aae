package examples_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCiteTestsThatExist: every test, example or benchmark the docs
// name as a proof (`TestX`, `ExampleX`, `BenchmarkX` in backticks) is a
// function of some _test.go file, so a renamed or deleted test cannot leave
// a claim standing on nothing.
func TestDocsCiteTestsThatExist(t *testing.T) {
	root := ".."
	funcs := map[string]bool{}
	funcRE := regexp.MustCompile(`(?m)^func (?:\([^)]*\) )?((?:Test|Example|Benchmark|Fuzz)\w*)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range funcRE.FindAllStringSubmatch(string(b), -1) {
				funcs[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !funcs["TestDocsCiteTestsThatExist"] {
		t.Fatal("the walk found no test functions")
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "deployments", "README.md"))
	citeRE := regexp.MustCompile("`((?:Test|Example|Benchmark|Fuzz)[A-Z_]\\w*)`")
	cited := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range citeRE.FindAllStringSubmatch(string(b), -1) {
			cited++
			if !funcs[m[1]] {
				t.Errorf("%s cites %s, which no _test.go defines", strings.TrimPrefix(doc, root+"/"), m[1])
			}
		}
	}
	if cited < 50 {
		t.Errorf("only %d citations found: the pattern no longer matches the docs", cited)
	}
}
