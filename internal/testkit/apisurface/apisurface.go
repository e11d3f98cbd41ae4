// Package apisurface measures the exported surface of the library's
// packages from their source: what a reader must hold in mind to use one.
// Its test keeps the limits the project set itself and reports the figures.
package apisurface

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Package is the measured surface of one package directory.
type Package struct {
	Dir string
	// Exported counts exported funcs, methods of exported types, types,
	// vars, consts, exported struct fields and interface methods.
	Exported int
	// Lines counts non-test Go source lines.
	Lines int
	// Names lists what Exported counted, as "Type.Method", "Type.Field", ...
	Names []string
	// Imports lists the module-local packages imported by non-test files.
	Imports []string
	// InternalLeaks lists exported declarations whose types name a package
	// under an internal/ directory, which users cannot name.
	InternalLeaks []string
}

// Measure reads the non-test Go files of dir. module is the module path,
// for telling local imports apart.
func Measure(dir, module string) (Package, error) {
	p := Package{Dir: dir}
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return p, err
	}
	imports := map[string]bool{}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		path := filepath.Join(dir, n)
		src, err := os.ReadFile(path)
		if err != nil {
			return p, err
		}
		p.Lines += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return p, err
		}
		internal := map[string]string{} // local name -> path, for internal imports
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(ip, module) {
				imports[strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")] = true
			}
			if strings.Contains(ip, "/internal/") || strings.HasSuffix(ip, "/internal") {
				name := ip[strings.LastIndex(ip, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				internal[name] = ip
			}
		}
		p.measureFile(f, internal)
	}
	for ip := range imports {
		p.Imports = append(p.Imports, ip)
	}
	sort.Strings(p.Imports)
	sort.Strings(p.Names)
	p.Exported = len(p.Names)
	return p, nil
}

func (p *Package) add(name string) { p.Names = append(p.Names, name) }

func (p *Package) leak(name string, expr ast.Node, internal map[string]string) {
	if expr == nil || len(internal) == 0 {
		return
	}
	ast.Inspect(expr, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if ip, ok := internal[id.Name]; ok {
					p.InternalLeaks = append(p.InternalLeaks, name+" uses "+ip+"."+sel.Sel.Name)
				}
			}
		}
		return true
	})
}

func (p *Package) measureFile(f *ast.File, internal map[string]string) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				recv := receiverName(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				name = recv + "." + name
			}
			p.add(name)
			p.leak(name, d.Type, internal)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					p.add(s.Name.Name)
					p.members(s.Name.Name, s.Type, internal)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							p.add(n.Name)
							p.leak(n.Name, s.Type, internal)
						}
					}
				}
			}
		}
	}
}

func (p *Package) members(typ string, t ast.Expr, internal map[string]string) {
	switch t := t.(type) {
	case *ast.StructType:
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 { // embedded
				n := receiverName(f.Type)
				if ast.IsExported(n) {
					p.add(typ + "." + n)
					p.leak(typ+"."+n, f.Type, internal)
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					p.add(typ + "." + n.Name)
					p.leak(typ+"."+n.Name, f.Type, internal)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					p.add(typ + "." + n.Name)
					p.leak(typ+"."+n.Name, m.Type, internal)
				}
			}
		}
	default:
		p.leak(typ, t, internal)
	}
}

func receiverName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiverName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.IndexExpr:
		return receiverName(t.X)
	case *ast.IndexListExpr:
		return receiverName(t.X)
	}
	return ""
}
