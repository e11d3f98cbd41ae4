package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestSnippetsCompile compiles every ```go block of README.md,
// CONTRIBUTING.md and docs/*.md with one `go vet` of a generated module, in
// a workspace (go.work) with this tree's core and nested modules, so that
// a snippet may import any of them. Errors name the Markdown file and line.
//
// The conventions, by what a block holds:
//   - a complete file (it starts with its package clause, after comments)
//     compiles as it is, as a package of its own;
//   - declarations (funcs, types, vars) compile at package level;
//   - a single expression (a handler's func literal) compiles as the value
//     of a package-level var;
//   - statements compile as the body of a func returning error.
//
// Fragments get their imports from the package names they use (the
// imports table below) and may use the names testdata/prelude.go declares
// (ctx, client, r, resp, queueURL, ...) without declaring them. A variable
// a fragment declares at its top level need not be used afterwards. An
// elision is a comment (// ...), never a bare "...". A block that is not
// Go is fenced as something else (```text, ```sh).
func TestSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nested modules' dependencies; not in -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}, pages...)
	prelude, err := os.ReadFile(filepath.Join("testdata", "prelude.go"))
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	mod := filepath.Join(work, "snippets")
	n := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range goBlocks(string(src)) {
			n++
			dir := filepath.Join(mod, fmt.Sprintf("s%03d", n))
			files, err := generate(page, b, prelude)
			if err != nil {
				t.Error(err)
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no ```go block found: the extraction is broken")
	}
	if t.Failed() {
		return
	}

	goVersion := goDirective(t, filepath.Join(root, "go.mod"))
	var gowork strings.Builder
	gowork.WriteString("go " + goVersion + "\n\nuse (\n\t./snippets\n")
	for _, m := range []string{".", "redisstore", "oteltempq", "lambdatempq", "sqsgrpc", "s3payload"} {
		fmt.Fprintf(&gowork, "\t%s\n", filepath.Join(root, m))
	}
	gowork.WriteString(")\n")
	writeFile(t, filepath.Join(work, "go.work"), gowork.String())
	writeFile(t, filepath.Join(mod, "go.mod"), "module example.com/snippets\n\ngo "+goVersion+"\n")

	// Workspace mode refuses -mod=mod, which GOFLAGS may hold: the
	// workspace's go.sum files say what to fetch. Other flags stay.
	goflags, err := exec.Command("go", "env", "GOFLAGS").Output()
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{"-mod=readonly"}
	for _, f := range strings.Fields(string(goflags)) {
		if !strings.HasPrefix(f, "-mod=") {
			flags = append(flags, f)
		}
	}
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(work, "go.work"), "GOFLAGS="+strings.Join(flags, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the docs' Go snippets do not compile (go vet: %v); fix the snippet, or see this test's conventions:\n%s", err, out)
	}
}

// A block is one ```go block: its text and the line of its first line.
type block struct {
	line int
	text string
}

// goBlocks returns the ```go blocks of a Markdown page.
func goBlocks(page string) []block {
	var blocks []block
	var cur *block
	var text strings.Builder
	sc := bufio.NewScanner(strings.NewReader(page))
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &block{line: line + 1}
			text.Reset()
		case cur != nil && strings.TrimSpace(l) == "```":
			cur.text = text.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(l)
			text.WriteByte('\n')
		}
	}
	return blocks
}

// imports maps the package names fragments use to their import paths.
var imports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "io": "io", "log": "log",
	"slog": "log/slog", "http": "net/http", "os": "os", "strings": "strings",
	"testing": "testing", "time": "time",

	"aws":    "github.com/aws/aws-sdk-go-v2/aws",
	"config": "github.com/aws/aws-sdk-go-v2/config",
	"sqs":    "github.com/aws/aws-sdk-go-v2/service/sqs",
	"types":  "github.com/aws/aws-sdk-go-v2/service/sqs/types",

	"backlog":      "github.com/tempqueues/tempqueues/backlog",
	"observe":      "github.com/tempqueues/tempqueues/observe",
	"reaper":       "github.com/tempqueues/tempqueues/reaper",
	"redrive":      "github.com/tempqueues/tempqueues/redrive",
	"requester":    "github.com/tempqueues/tempqueues/requester",
	"responder":    "github.com/tempqueues/tempqueues/responder",
	"sqsapi":       "github.com/tempqueues/tempqueues/sqsapi",
	"sqsclient":    "github.com/tempqueues/tempqueues/sqsclient",
	"sqshttp":      "github.com/tempqueues/tempqueues/sqshttp",
	"sqstest":      "github.com/tempqueues/tempqueues/sqstest",
	"tempqueue":    "github.com/tempqueues/tempqueues/tempqueue",
	"virtualqueue": "github.com/tempqueues/tempqueues/virtualqueue",
	"lambdatempq":  "github.com/tempqueues/tempqueues/lambdatempq",
	"oteltempq":    "github.com/tempqueues/tempqueues/oteltempq",
	"redisstore":   "github.com/tempqueues/tempqueues/redisstore",
	"sqsgrpc":      "github.com/tempqueues/tempqueues/sqsgrpc",
	"s3payload":    "github.com/tempqueues/tempqueues/s3payload",
	"s3":           "github.com/aws/aws-sdk-go-v2/service/s3",

	"lambda":   "github.com/aws/aws-lambda-go/lambda",
	"redis":    "github.com/redis/go-redis/v9",
	"grpc":     "google.golang.org/grpc",
	"codes":    "google.golang.org/grpc/codes",
	"status":   "google.golang.org/grpc/status",
	"health":   "google.golang.org/grpc/health",
	"healthpb": "google.golang.org/grpc/health/grpc_health_v1",
}

// generate turns block b of page into the files of a package: the block
// as it is if it is a complete file, else the block wrapped as its kind
// needs, with its imports and the prelude. A //line comment points errors
// at the page.
func generate(page string, b block, prelude []byte) (map[string]string, error) {
	at := fmt.Sprintf("//line %s:%d\n", page, b.line)
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", b.text, parser.PackageClauseOnly); err == nil && f.Name != nil {
		return map[string]string{"main.go": at + b.text}, nil
	}
	const pkg = "package snippet\n\n"
	var body string
	var file *ast.File
	if f, err := parser.ParseFile(fset, "", pkg+b.text, parser.SkipObjectResolution); err == nil {
		file, body = f, b.text // declarations
	} else if _, err := parser.ParseExpr(b.text); err == nil {
		body = "var _ = " + b.text
		if file, err = parser.ParseFile(fset, "", pkg+body, parser.SkipObjectResolution); err != nil {
			return nil, err
		}
	} else {
		f, err := parser.ParseFile(fset, "", pkg+"func _() error {\n"+b.text+"\n}", parser.SkipObjectResolution)
		if err != nil {
			if list, ok := err.(scanner.ErrorList); ok && len(list) > 0 {
				// The fragment's first line is the source's fourth.
				return nil, fmt.Errorf("%s:%d: not Go statements: %s", page, b.line+list[0].Pos.Line-4, list[0].Msg)
			}
			return nil, fmt.Errorf("%s:%d: neither a file, declarations, an expression nor statements: %v", page, b.line, err)
		}
		file, body = f, statements(fset, f, len(pkg)+len("func _() error {\n"), b.text)
		at = fmt.Sprintf("//line %s:%d\n", page, b.line-1) // the func's line comes first
	}
	var names []string
	for name := range usedPackages(file) {
		names = append(names, name)
	}
	sort.Strings(names)
	var src strings.Builder
	src.WriteString(pkg)
	for _, name := range names {
		fmt.Fprintf(&src, "import %s %q\n", name, imports[name])
	}
	src.WriteString("\n" + at + body + "\n")
	return map[string]string{"prelude.go": string(prelude), "snippet.go": src.String()}, nil
}

// statements wraps the statements text (parsed in f, starting at offset
// off of its source) as a func body: each variable declared at the top
// level is used right after its declaration, on the same line, and the
// func returns nil unless its last statement returns.
func statements(fset *token.FileSet, f *ast.File, off int, text string) string {
	fn := f.Decls[0].(*ast.FuncDecl)
	type insert struct {
		at   int
		text string
	}
	var ins []insert
	for _, s := range fn.Body.List {
		var declared []string
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, e := range s.Lhs {
					if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
						declared = append(declared, id.Name)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					for _, id := range sp.(*ast.ValueSpec).Names {
						if id.Name != "_" {
							declared = append(declared, id.Name)
						}
					}
				}
			}
		}
		if len(declared) > 0 {
			ins = append(ins, insert{fset.Position(s.End()).Offset - off, "; _ = []any{" + strings.Join(declared, ", ") + "}"})
		}
	}
	var out bytes.Buffer
	last := 0
	for _, in := range ins {
		out.WriteString(text[last:in.at])
		out.WriteString(in.text)
		last = in.at
	}
	out.WriteString(text[last:])
	tail := "\nreturn nil\n}"
	if n := len(fn.Body.List); n > 0 {
		if _, ok := fn.Body.List[n-1].(*ast.ReturnStmt); ok {
			tail = "\n}"
		}
	}
	return "func _() error {\n" + out.String() + tail
}

// usedPackages returns the names of the imports table that f uses as a
// package (X in X.Sel) and does not declare itself.
func usedPackages(f *ast.File) map[string]bool {
	declared := map[string]bool{}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, e := range n.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						declared[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				declared[id.Name] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				declared[id.Name] = true
			}
		case *ast.RangeStmt:
			for _, e := range []ast.Expr{n.Key, n.Value} {
				if id, ok := e.(*ast.Ident); ok && n.Tok == token.DEFINE {
					declared[id.Name] = true
				}
			}
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				if _, known := imports[id.Name]; known {
					used[id.Name] = true
				}
			}
		}
		return true
	})
	for name := range declared {
		delete(used, name)
	}
	return used
}

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The extraction and the wrapping themselves: a fragment's variables need
// no use, its imports come from the table, a complete file is untouched.
func TestGenerate(t *testing.T) {
	page := "text\n```go\nerr := resp.Serve(ctx, queueURL, sqshttp.Handler(mux))\n```\n```sh\nls\n```\n" +
		"```go\npackage main\n\nfunc main() {}\n```\n"
	blocks := goBlocks(page)
	if len(blocks) != 2 || blocks[0].line != 3 || blocks[1].line != 9 {
		t.Fatalf("blocks %+v", blocks)
	}
	files, err := generate("p.md", blocks[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	src := files["snippet.go"]
	for _, want := range []string{`import sqshttp "github.com/tempqueues/tempqueues/sqshttp"`, "//line p.md:2\n",
		"sqshttp.Handler(mux)); _ = []any{err}", "return nil"} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source lacks %q:\n%s", want, src)
		}
	}
	files, err = generate("p.md", blocks[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := files["main.go"]; got != "//line p.md:9\npackage main\n\nfunc main() {}\n" || len(files) != 1 {
		t.Errorf("a complete file became %q", files)
	}
	if _, err := generate("p.md", block{1, "x := f(...)\n"}, nil); err == nil {
		t.Error("a bare ... was accepted")
	}
	used := usedPackages(mustParse(t, "package p\nfunc _() { time := 1; _ = time; http.Get(\"\") }"))
	if !used["http"] || used["time"] {
		t.Errorf("packages used: %v, want http and not the variable time", used)
	}
}

func mustParse(t *testing.T, src string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// goDirective returns the Go version a go.mod declares, so that the
// generated workspace asks for what the modules it uses ask for.
func goDirective(t *testing.T, gomod string) string {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return v
		}
	}
	t.Fatalf("%s declares no go version", gomod)
	return ""
}
