// Lists the protobuf fields whose Go field is a value (not a pointer) tagged `omitempty`:
// Go's JSON leaves such a field out when it is zero, where protobuf writes it, so a decoder
// that wants what JSON would give must leave out the zero too. A pointer field set to zero
// (`replicas: 0`) is written by both and must be kept.
//
// Usage: go run omitempty.go <proto package prefix> <dir> [<dir> ...]
// Prints "<proto message>\t<proto field>" lines, sorted.
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
					if proto == "" || !strings.Contains(json, ",omitempty") {
						continue
					}
					if _, pointer := field.Type.(*ast.StarExpr); pointer {
						continue
					}
					for _, part := range strings.Split(proto, ",") {
						if name, ok := strings.CutPrefix(part, "name="); ok {
							lines = append(lines, pkg+"."+ts.Name.Name+"\t"+name)
						}
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
