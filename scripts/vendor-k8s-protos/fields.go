// Lists what the Go structs' tags say of a protobuf field that its `.proto` does not: its
// JSON name, when that differs from its protobuf name (`Webhooks` is `webhooks`; an embedded
// struct is `,inline`, flattened into its parent; `-` is not in JSON), and whether Go's JSON
// leaves it out when zero (a value, not a pointer, tagged `omitempty`: protobuf writes it, so
// a decoder that wants what JSON gives must leave the zero out too; a pointer set to zero,
// `replicas: 0`, is written by both and must be kept).
//
// Usage: go run fields.go <proto package prefix> <dir>
// Prints "<proto message>\t<proto field>\t<JSON name>\t<omitempty or empty>" lines, sorted,
// for the fields with something to say.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// The name of a struct field: its own, or an embedded one's type name.
func goName(field *ast.Field) string {
	if len(field.Names) > 0 {
		return field.Names[0].Name
	}
	typ := field.Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch t := typ.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return "_"
}

func main() {
	prefix, root := os.Args[1], os.Args[2]
	var lines []string
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), "generated.proto")); err != nil {
			return nil
		}
		if strings.Contains(dir, "testdata") || strings.Contains(dir, "testapigroup") {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := prefix + "." + strings.ReplaceAll(filepath.ToSlash(dir), "/", ".")
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, field := range st.Fields.List {
					if field.Tag == nil {
						continue
					}
					tag := reflect.StructTag(strings.Trim(field.Tag.Value, "`"))
					proto, json := tag.Get("protobuf"), tag.Get("json")
					if proto == "" {
						continue
					}
					jsonName, options, _ := strings.Cut(json, ",")
					if json == "-" {
						jsonName = "-"
					} else if jsonName == "" && strings.Contains(","+options+",", ",inline,") {
						jsonName = ",inline"
					}
					_, pointer := field.Type.(*ast.StarExpr)
					omit := ""
					if strings.Contains(","+options+",", ",omitempty,") && !pointer {
						omit = "omitempty"
					}
					// The protobuf name is the tag's `name=`, else (go-to-protobuf's rule) the
					// Go field's name, or an embedded struct's type name, lower-camel-cased.
					name := goName(field)
					name = strings.ToLower(name[:1]) + name[1:]
					for _, part := range strings.Split(proto, ",") {
						if tagged, ok := strings.CutPrefix(part, "name="); ok {
							name = tagged
						}
					}
					if jsonName == "" && !strings.Contains(","+options+",", ",inline,") {
						jsonName = name
					}
					if name != jsonName || omit != "" {
						lines = append(lines, pkg+"."+ts.Name.Name+"\t"+name+"\t"+jsonName+"\t"+omit)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sort.Strings(lines)
	for _, line := range lines {
		fmt.Println(line)
	}
}
