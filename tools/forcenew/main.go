// Command forcenew prints the `ForceNew: true` fields of a Terraform resource of a provider built
// on the Terraform plugin SDK v2, read from the provider's Go source with go/ast (the standard
// library only; the provider is never compiled).
//
// Usage: go run ./tools/forcenew DIR... -- RESOURCE
//
// DIRs are the Go packages to read (every non-test .go file of each). RESOURCE is the Terraform
// resource name; its schema starts where the provider registers it, a
// `registry.Schema{Name: RESOURCE, Schema: ...}` that is not a data source. Each ForceNew
// field is one JSON line on stdout:
//
//	{"path": ["node_config", "guest_accelerator"], "many": [false, true], "block": true,
//	 "file": "services/container/node_config.go", "line": 320}
//
// many[i] tells whether path[i] is a list or set with MaxItems other than 1 (the Pulumi bridge
// names such a field in the plural and keeps it an array); block, whether the field's elements
// are blocks of fields (then its ForceNew covers adding or removing a block, each field inside
// having its own). Names are followed across all DIRs by their last part
// (tpgresource.MergeSchemas as MergeSchemas), calls with their arguments bound to the
// function's parameters; anything the tool cannot follow is an error, so that no schema is
// silently skipped.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

type field struct {
	Path  []string `json:"path"`
	Many  []bool   `json:"many"`
	Block bool     `json:"block"`
	File  string   `json:"file"`
	Line  int      `json:"line"`
}

// scope binds a called function's parameters to its arguments (read in the caller's scope)
// and its local variables to their values.
type scope struct {
	names map[string]bound
}

// bound is an expression with the scope its names are read in.
type bound struct {
	expr ast.Expr
	in   *scope
}

type reader struct {
	fset     *token.FileSet
	funcs    map[string]*ast.FuncDecl
	vars     map[string]ast.Expr
	twice    map[string]bool // declared in more than one package: never followed
	registry []*ast.CompositeLit
	root     string
	out      []field
}

func main() {
	args := os.Args[1:]
	if len(args) < 3 || args[len(args)-2] != "--" {
		fail("usage: forcenew DIR... -- RESOURCE")
	}
	dirs, resource := args[:len(args)-2], args[len(args)-1]
	r := &reader{
		fset:  token.NewFileSet(),
		funcs: map[string]*ast.FuncDecl{},
		vars:  map[string]ast.Expr{},
		twice: map[string]bool{},
		root:  commonDir(dirs),
	}
	for _, dir := range dirs {
		r.load(dir)
	}
	r.schemaMap(r.registered(resource), nil, nil)
	enc := json.NewEncoder(os.Stdout)
	for _, f := range r.out {
		if err := enc.Encode(f); err != nil {
			fail(err.Error())
		}
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "forcenew:", msg)
	os.Exit(1)
}

// commonDir is the folder above every DIR; the output's file names are relative to it.
func commonDir(dirs []string) string {
	common := filepath.Clean(dirs[0])
	for _, d := range dirs[1:] {
		for !strings.HasPrefix(filepath.Clean(d)+"/", common+"/") {
			common = filepath.Dir(common)
		}
	}
	return filepath.Dir(common)
}

func (r *reader) load(dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		fail("no Go files in " + dir)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(r.fset, path, nil, 0)
		if err != nil {
			fail(err.Error())
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					r.declare(d.Name.Name)
					r.funcs[d.Name.Name] = d
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if vs, ok := spec.(*ast.ValueSpec); ok && len(vs.Values) == len(vs.Names) {
						for i, n := range vs.Names {
							r.declare(n.Name)
							r.vars[n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok && isSelector(lit.Type, "registry", "Schema") {
				r.registry = append(r.registry, lit)
			}
			return true
		})
	}
}

func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

func (r *reader) declare(name string) {
	_, isFunc := r.funcs[name]
	_, isVar := r.vars[name]
	r.twice[name] = r.twice[name] || isFunc || isVar
}

// registered is the schema the provider registers for the resource.
func (r *reader) registered(resource string) bound {
	var found []ast.Expr
	for _, lit := range r.registry {
		props := keyed(lit)
		name, ok := props["Name"].(*ast.BasicLit)
		if !ok || isSelector(props["Type"], "registry", "SchemaTypeDataSource") {
			continue
		}
		if value, _ := strconv.Unquote(name.Value); value == resource {
			found = append(found, props["Schema"])
		}
	}
	if len(found) != 1 {
		fail(fmt.Sprintf("%s is registered %d times", resource, len(found)))
	}
	return bound{found[0], nil}
}

// resolve follows names and calls to the expression they stand for.
func (r *reader) resolve(b bound) bound {
	switch x := b.expr.(type) {
	case *ast.Ident:
		if b.in != nil {
			if local, ok := b.in.names[x.Name]; ok {
				return r.resolve(local)
			}
		}
		if v, ok := r.vars[x.Name]; ok && !r.twice[x.Name] {
			return r.resolve(bound{v, nil})
		}
		return r.resolve(r.call(x.Name, nil, b.in))
	case *ast.SelectorExpr:
		if v, ok := r.vars[x.Sel.Name]; ok && !r.twice[x.Sel.Name] {
			return r.resolve(bound{v, nil})
		}
		return r.resolve(r.call(x.Sel.Name, nil, b.in))
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			return r.resolve(bound{x.X, b.in})
		}
	case *ast.CallExpr:
		if name := calleeName(x); name != "MergeSchemas" {
			return r.resolve(r.call(name, x.Args, b.in))
		}
	}
	return b
}

// call is the result of a function (the expression of its last top-level return), its
// parameters bound to args and its top-level `name := value` variables to their values; a
// function named without a call has no arguments. A function that sets a schema's Schema,
// Elem or ForceNew by assignment is not followed.
func (r *reader) call(name string, args []ast.Expr, in *scope) bound {
	fn, ok := r.funcs[name]
	if !ok || r.twice[name] {
		fail("cannot follow " + name)
	}
	s := &scope{names: map[string]bound{}}
	i := 0
	for _, param := range fn.Type.Params.List {
		for _, n := range param.Names {
			if i < len(args) {
				s.names[n.Name] = bound{args[i], in}
			}
			i++
		}
	}
	var result ast.Expr
	for _, stmt := range fn.Body.List {
		switch st := stmt.(type) {
		case *ast.ReturnStmt:
			if len(st.Results) == 1 {
				result = st.Results[0]
			}
		case *ast.AssignStmt:
			if id, ok := st.Lhs[0].(*ast.Ident); ok && st.Tok == token.DEFINE && len(st.Lhs) == 1 {
				s.names[id.Name] = bound{st.Rhs[0], s}
			}
		}
	}
	if result == nil {
		fail("function " + name + " does not end in a single return")
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if st, ok := n.(*ast.AssignStmt); ok {
			for _, lhs := range st.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok {
					switch sel.Sel.Name {
					case "Schema", "Elem", "ForceNew":
						fail("function " + name + " assigns " + sel.Sel.Name + " at " + r.where(sel))
					}
				}
			}
		}
		return true
	})
	return bound{result, s}
}

func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

func keyed(lit *ast.CompositeLit) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok {
				out[id.Name] = kv.Value
			}
		}
	}
	return out
}

func (r *reader) where(e ast.Expr) string {
	return r.fset.Position(e.Pos()).String()
}

// schemaMap walks a map[string]*schema.Schema (or a *schema.Resource holding one).
func (r *reader) schemaMap(b bound, path []string, many []bool) {
	b = r.resolve(b)
	switch x := b.expr.(type) {
	case *ast.CallExpr: // MergeSchemas
		for _, arg := range x.Args {
			r.schemaMap(bound{arg, b.in}, path, many)
		}
	case *ast.CompositeLit:
		if _, isMap := x.Type.(*ast.MapType); !isMap {
			if sch, ok := keyed(x)["Schema"]; ok {
				r.schemaMap(bound{sch, b.in}, path, many)
				return
			}
			fail("not a schema map or resource at " + r.where(x))
		}
		for _, elt := range x.Elts {
			kv := elt.(*ast.KeyValueExpr)
			lit, ok := kv.Key.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				fail("a schema key that is not a string at " + r.where(kv))
			}
			name, _ := strconv.Unquote(lit.Value)
			r.schema(bound{kv.Value, b.in}, append(path[:len(path):len(path)], name), many)
		}
	default:
		fail("not a schema map at " + r.where(b.expr))
	}
}

// schema reads one field's *schema.Schema: its ForceNew, and the fields of its block.
func (r *reader) schema(b bound, path []string, many []bool) {
	b = r.resolve(b)
	lit, ok := b.expr.(*ast.CompositeLit)
	if !ok {
		fail("not a schema at " + r.where(b.expr))
	}
	props := keyed(lit)
	isMany := false
	if isSelector(props["Type"], "schema", "TypeList") || isSelector(props["Type"], "schema", "TypeSet") {
		max, ok := props["MaxItems"].(*ast.BasicLit)
		isMany = !ok || max.Value != "1"
	}
	many = append(many[:len(many):len(many)], isMany)
	var block *ast.CompositeLit
	if elem, ok := props["Elem"]; ok {
		e := r.resolve(bound{elem, b.in})
		elemLit, ok := e.expr.(*ast.CompositeLit)
		if !ok {
			fail("cannot follow the Elem at " + r.where(elem))
		}
		if _, isResource := keyed(elemLit)["Schema"]; isResource {
			block = elemLit
			defer r.schemaMap(e, path, many)
		}
	}
	if fn, ok := props["ForceNew"].(*ast.Ident); ok && fn.Name == "true" {
		pos := r.fset.Position(fn.Pos())
		rel, _ := filepath.Rel(r.root, pos.Filename)
		r.out = append(r.out, field{Path: path, Many: many, Block: block != nil, File: rel, Line: pos.Line})
	} else if _, present := props["ForceNew"]; present && !(ok && fn.Name == "false") {
		fail("ForceNew is neither true nor false at " + r.where(props["ForceNew"]))
	}
}
