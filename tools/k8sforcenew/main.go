// Command k8sforcenew prints pulumi-kubernetes' replacement rules, read from the provider's Go
// source with go/ast (the standard library only; the provider is never compiled).
//
// Usage: go run ./tools/k8sforcenew DIR
//
// DIR is the provider's `pkg/provider` package (every non-test .go file is read). The rules are
// the method `forceNewProperties` (provider.go's Diff replaces an object when a change in the
// JSON merge patch lies at or below one of the paths it returns) and the package-level table it
// reads, `forceNew` (group -> version -> kind -> paths). Each rule is one JSON line on stdout:
//
//	{"rule": "always", "paths": [{"path": ".metadata.name", "file": "diff.go", "line": 208}, ...]}
//	{"rule": "table", "group": "apps", "version": "v1", "kind": "StatefulSet", "paths": [...]}
//	{"rule": "branch", "condition": "clients.IsSecret(obj) && ...", "paths": [...]}
//	{"rule": "branch", "condition": "kindExists", "table": true}
//
// "always": the paths every object replaces on (the method's first value); "table": one kind
// of the table; "branch": the if/else-if chain inside the table lookup, in order, with its
// condition as written (the first that holds wins; `table: true` marks the branch that adds the
// kind's table entry). Each path carries the file and line of the string literal that ends it. Package
// variables and functions are evaluated as written (composite literals, string concatenation,
// append, calls with their parameters bound, `for range` over a parameter); anything else is an
// error, so that no rule is silently skipped.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// path is one property path with the line of the literal that ends it.
type path struct {
	Path string `json:"path"`
	File string `json:"file"`
	Line int    `json:"line"`
}

// value is what an expression evaluates to: a string, a list of paths or a keyed table.
type value struct {
	str   *path
	list  []path
	table map[string]value
	isMap bool
}

type rule struct {
	Rule      string `json:"rule"`
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Condition string `json:"condition,omitempty"`
	Table     bool   `json:"table,omitempty"`
	Paths     []path `json:"paths,omitempty"`
}

type reader struct {
	fset  *token.FileSet
	funcs map[string]*ast.FuncDecl
	vars  map[string]ast.Expr
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: k8sforcenew DIR")
	}
	r := &reader{fset: token.NewFileSet(), funcs: map[string]*ast.FuncDecl{}, vars: map[string]ast.Expr{}}
	method := r.load(os.Args[1])
	var rules []rule
	chain := r.walk(method, &rules)
	table := r.eval(r.vars["forceNew"], nil)
	for _, group := range sortedKeys(table) {
		for _, version := range sortedKeys(table.table[group]) {
			for _, kind := range sortedKeys(table.table[group].table[version]) {
				paths := table.table[group].table[version].table[kind].list
				rules = append(rules, rule{Rule: "table", Group: group, Version: version, Kind: kind, Paths: paths})
			}
		}
	}
	rules = append(rules, chain...)
	enc := json.NewEncoder(os.Stdout)
	for _, rl := range rules {
		if err := enc.Encode(rl); err != nil {
			fail(err.Error())
		}
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "k8sforcenew:", msg)
	os.Exit(1)
}

// load reads the package and returns the body of the method forceNewProperties.
func (r *reader) load(dir string) *ast.BlockStmt {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		fail("no Go files in " + dir)
	}
	var method *ast.BlockStmt
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(r.fset, name, nil, 0)
		if err != nil {
			fail(err.Error())
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					r.funcs[d.Name.Name] = d
				} else if d.Name.Name == "forceNewProperties" {
					method = d.Body
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if vs, ok := spec.(*ast.ValueSpec); ok && len(vs.Values) == len(vs.Names) {
						for i, n := range vs.Names {
							r.vars[n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	if method == nil || r.vars["forceNew"] == nil {
		fail("no forceNewProperties method or forceNew table in " + dir)
	}
	return method
}

// walk reads the method: its `props := <always>` and the if/else-if chain that appends to it.
func (r *reader) walk(body *ast.BlockStmt, rules *[]rule) []rule {
	var chain []rule
	ast.Inspect(body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			if id, ok := s.Lhs[0].(*ast.Ident); ok && id.Name == "props" && s.Tok == token.DEFINE {
				*rules = append(*rules, rule{Rule: "always", Paths: r.eval(s.Rhs[0], nil).list})
			}
		case *ast.IfStmt:
			if s.Init != nil { // the table lookups `if x, ok := m[k]; ok`: go inside
				return true
			}
			for s != nil {
				chain = append(chain, r.branch(s))
				next, _ := s.Else.(*ast.IfStmt)
				if s.Else != nil && next == nil {
					fail("an else without a condition in forceNewProperties")
				}
				s = next
			}
			return false
		}
		return true
	})
	if len(chain) == 0 {
		fail("no condition chain in forceNewProperties")
	}
	return chain
}

// branch is one arm of the chain: `props = append(props, X...)`.
func (r *reader) branch(s *ast.IfStmt) rule {
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, r.fset, s.Cond); err != nil {
		fail(err.Error())
	}
	if len(s.Body.List) != 1 {
		fail("a branch of forceNewProperties is not one append: " + r.where(s))
	}
	assign, ok := s.Body.List[0].(*ast.AssignStmt)
	call, isCall := ast.Expr(nil), false
	if ok {
		c, yes := assign.Rhs[0].(*ast.CallExpr)
		call, isCall = c, yes && calleeName(c) == "append" && c.Ellipsis.IsValid()
	}
	if !isCall {
		fail("a branch of forceNewProperties is not one append: " + r.where(s))
	}
	added := call.(*ast.CallExpr).Args[1]
	out := rule{Rule: "branch", Condition: buf.String()}
	if id, ok := added.(*ast.Ident); ok && r.vars[id.Name] == nil {
		out.Table = true // the kind's entry, read from the table
	} else {
		out.Paths = r.eval(added, nil).list
	}
	return out
}

func (r *reader) where(n ast.Node) string {
	return r.fset.Position(n.Pos()).String()
}

func calleeName(call *ast.CallExpr) string {
	if id, ok := call.Fun.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func sortedKeys(v value) []string {
	keys := make([]string, 0, len(v.table))
	for k := range v.table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// eval evaluates an expression of the rules' own code; env holds a called function's locals.
func (r *reader) eval(e ast.Expr, env map[string]value) value {
	switch x := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(x.Value)
		if x.Kind != token.STRING || err != nil {
			fail("not a string: " + r.where(x))
		}
		at := r.fset.Position(x.Pos())
		return value{str: &path{Path: s, File: filepath.Base(at.Filename), Line: at.Line}}
	case *ast.BinaryExpr:
		left, right := r.eval(x.X, env), r.eval(x.Y, env)
		if x.Op != token.ADD || left.str == nil || right.str == nil {
			fail("not a string concatenation: " + r.where(x))
		}
		return value{str: &path{Path: left.str.Path + right.str.Path, File: right.str.File, Line: right.str.Line}}
	case *ast.Ident:
		if v, ok := env[x.Name]; ok {
			return v
		}
		if init, ok := r.vars[x.Name]; ok {
			return r.eval(init, nil)
		}
	case *ast.CompositeLit:
		return r.composite(x, env)
	case *ast.CallExpr:
		return r.call(x, env)
	}
	fail("cannot evaluate: " + r.where(e))
	return value{}
}

func (r *reader) composite(x *ast.CompositeLit, env map[string]value) value {
	out := value{table: map[string]value{}}
	for _, elt := range x.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			key := r.eval(kv.Key, env)
			if key.str == nil {
				fail("a table key that is not a string: " + r.where(kv))
			}
			out.isMap, out.table[key.str.Path] = true, r.eval(kv.Value, env)
			continue
		}
		item := r.eval(elt, env)
		if item.str == nil {
			fail("a list item that is not a string: " + r.where(elt))
		}
		out.list = append(out.list, *item.str)
	}
	if out.isMap && len(out.list) > 0 {
		fail("a literal mixing keys and items: " + r.where(x))
	}
	return out
}

// call evaluates append(...) and calls of the package's functions.
func (r *reader) call(x *ast.CallExpr, env map[string]value) value {
	name := calleeName(x)
	if name == "append" {
		out := value{list: append([]path(nil), r.eval(x.Args[0], env).list...)}
		for i, arg := range x.Args[1:] {
			v := r.eval(arg, env)
			if x.Ellipsis.IsValid() && i == len(x.Args)-2 {
				out.list = append(out.list, v.list...)
			} else if v.str != nil {
				out.list = append(out.list, *v.str)
			} else {
				fail("append of a list without ...: " + r.where(arg))
			}
		}
		return out
	}
	fn, ok := r.funcs[name]
	if !ok {
		fail("a call the reader cannot follow: " + r.where(x))
	}
	locals := map[string]value{}
	params := fn.Type.Params.List
	argIndex := 0
	for _, p := range params {
		_, variadic := p.Type.(*ast.Ellipsis)
		for _, n := range p.Names {
			if variadic {
				rest := value{}
				for _, a := range x.Args[argIndex:] {
					rest.list = append(rest.list, *r.eval(a, env).str)
				}
				locals[n.Name] = rest
				continue
			}
			locals[n.Name] = r.eval(x.Args[argIndex], env)
			argIndex++
		}
	}
	return r.run(fn.Body.List, locals)
}

// run executes a function body: var declarations, assignments, range loops and the return.
func (r *reader) run(stmts []ast.Stmt, env map[string]value) value {
	for _, stmt := range stmts {
		switch s := stmt.(type) {
		case *ast.DeclStmt:
			for _, spec := range s.Decl.(*ast.GenDecl).Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					env[n.Name] = value{}
				}
			}
		case *ast.AssignStmt:
			env[s.Lhs[0].(*ast.Ident).Name] = r.eval(s.Rhs[0], env)
		case *ast.RangeStmt:
			for _, item := range r.eval(s.X, env).list {
				env[s.Value.(*ast.Ident).Name] = value{str: &item}
				if v := r.run(s.Body.List, env); v.str != nil || v.list != nil || v.isMap {
					fail("a return inside a loop: " + r.where(s))
				}
			}
		case *ast.ReturnStmt:
			return r.eval(s.Results[0], env)
		default:
			fail("a statement the reader cannot run: " + r.where(s))
		}
	}
	return value{}
}
