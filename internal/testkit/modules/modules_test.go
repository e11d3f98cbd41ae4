package modules

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const core = "github.com/tempqueues/tempqueues"

// root is the repository's top directory.
var root = filepath.Join("..", "..", "..")

// module is one go.mod of the repository.
type module struct {
	dir      string // relative to root, "." for the core
	path     string
	requires map[string]string // module path -> version
}

// published reports whether others are meant to depend on m: every
// module but the examples, which are programs to copy.
func (m module) published() bool { return !strings.HasPrefix(m.dir, "examples") }

func modules(t *testing.T) []module {
	t.Helper()
	var mods []module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		m := module{dir: filepath.ToSlash(rel), requires: map[string]string{}}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		inRequire := false
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			f := strings.Fields(strings.TrimSpace(sc.Text()))
			switch {
			case len(f) == 0:
			case f[0] == "module" && len(f) == 2:
				m.path = f[1]
			case f[0] == "require" && len(f) == 2 && f[1] == "(":
				inRequire = true
			case f[0] == ")":
				inRequire = false
			case f[0] == "require" && len(f) >= 3:
				m.requires[f[1]] = f[2]
			case inRequire && len(f) >= 2:
				m.requires[f[0]] = f[1]
			}
		}
		mods = append(mods, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) < 5 {
		t.Fatalf("found %d modules; the walk is broken", len(mods))
	}
	return mods
}

// goFiles calls fn for each Go file of dir's module (not descending into
// other modules).
func goFiles(t *testing.T, dir string, fn func(path string, test bool)) {
	t.Helper()
	top := filepath.Join(root, dir)
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != top {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
				if d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			fn(p, strings.HasSuffix(p, "_test.go"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every published module carries the licence: a module's zip holds only
// its own directory, so the core's LICENSE does not reach users of a
// nested module.
func TestEveryModuleIsLicensed(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(want, []byte("Apache License")) || !bytes.Contains(want, []byte("Version 2.0, January 2004")) {
		t.Fatal("LICENSE is not the Apache License 2.0")
	}
	for _, m := range modules(t) {
		if !m.published() || m.dir == "." {
			continue
		}
		got, err := os.ReadFile(filepath.Join(root, m.dir, "LICENSE"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: LICENSE missing or not the core's (%v)", m.dir, err)
		}
	}
}

// release matches a release version: no pseudo-version, no pre-release.
var release = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// A nested module requires versions of the repository's modules that
// exist once published: releases named in CHANGELOG.md, never the
// v0.0.0-00010101000000-000000000000 placeholder, which a dependent cannot
// resolve (replace directives apply only inside this repository).
func TestNestedModulesRequireReleases(t *testing.T) {
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modules(t) {
		for path, v := range m.requires {
			if path != core && !strings.HasPrefix(path, core+"/") {
				continue
			}
			if !release.MatchString(v) {
				t.Errorf("%s requires %s %s: not a release", m.dir, path, v)
				continue
			}
			if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(v) + `\b`).Match(changelog) {
				t.Errorf("%s requires %s %s: CHANGELOG.md has no section for %s", m.dir, path, v, v)
			}
		}
	}
}

// The nested modules build on the core's public API only: its internal
// packages carry no compatibility promise, and a nested module released
// apart from the core would break when they change. Their tests may use
// the core's test helpers (internal/testkit/sqstestenv): tests run in this
// repository, against the core of the same commit.
func TestNestedModulesUseOnlyPublicAPI(t *testing.T) {
	for _, m := range modules(t) {
		if m.dir == "." {
			continue
		}
		goFiles(t, m.dir, func(p string, test bool) {
			if test {
				return
			}
			for _, imp := range imports(t, p) {
				if strings.HasPrefix(imp, core+"/internal") {
					t.Errorf("%s imports %s", p, imp)
				}
			}
		})
	}
}

// No package of the repository is named like a package its users import
// beside it (as otel clashed with go.opentelemetry.io/otel and lambda with
// github.com/aws/aws-lambda-go/lambda): names follow
// opentelemetry-go-contrib's, otelhttp, otelaws.
func TestPackageNamesDoNotClash(t *testing.T) {
	theirs := map[string]string{} // last element -> an import path
	ours := map[string]string{}   // package name -> file
	for _, m := range modules(t) {
		goFiles(t, m.dir, func(p string, test bool) {
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			if name := f.Name.Name; !test && name != "main" {
				ours[name] = p
			}
			for _, imp := range imports(t, p) {
				if imp != core && !strings.HasPrefix(imp, core+"/") && strings.Contains(imp, ".") {
					theirs[imp[strings.LastIndex(imp, "/")+1:]] = imp
				}
			}
		})
	}
	for name, file := range ours {
		if imp, ok := theirs[name]; ok {
			t.Errorf("package %s (%s) has the name of %s", name, file, imp)
		}
	}
}

func imports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
