#!/usr/bin/env bash
# Vendors the Kubernetes protobuf schemas the core decodes built-in types with (issue 16):
# every `generated.proto` of k8s.io/api and the apimachinery packages they import, at the
# pinned versions, into core/proto/, with comment lines dropped (the licence header is kept).
# Also writes core/proto/groups.tsv: each proto package and the API group it serves, read from
# the Go package's own `GroupName`. Then compile the descriptor set the core embeds:
#   RECONCILE_REGENERATE_PROTO=1 cargo test -p reconcile-core --test protobuf_schema
# Needs Go (for `go mod download`); the result is committed, so building never does.
set -euo pipefail
cd "$(dirname "$0")/.."
API_VERSION=v0.36.3
MACHINERY_VERSION=v0.36.3
out=core/proto
api=$(go mod download -json "k8s.io/api@$API_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
machinery=$(go mod download -json "k8s.io/apimachinery@$MACHINERY_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
# The built-in kinds served outside k8s.io/api: CustomResourceDefinition and APIService.
apiext=$(go mod download -json "k8s.io/apiextensions-apiserver@$API_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
aggregator=$(go mod download -json "k8s.io/kube-aggregator@$API_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
EXTRA="apiextensions-apiserver:$apiext:pkg/apis/apiextensions/v1 kube-aggregator:$aggregator:pkg/apis/apiregistration/v1"
rm -rf "$out/k8s.io"
strip() {
  # Keep the leading /* ... */ licence block; drop every other line that is only a comment,
  # and runs of blank lines.
  python3 - "$1" "$2" <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]
lines = open(src).read().split("\n")
out, in_header, blank = [], False, False
for i, line in enumerate(lines):
    s = line.strip()
    if i == 0 and s.startswith("/*"):
        in_header = True
    if in_header:
        out.append(line)
        if s.endswith("*/"):
            in_header = False
        continue
    if s.startswith("//"):
        continue
    if s == "":
        if blank:
            continue
        blank = True
    else:
        blank = False
    out.append(line)
open(dst, "w").write("\n".join(out))
PY
}
printf '# proto package\tAPI group (from the Go package'"'"'s GroupName; empty is the core group)\n' >"$out/groups.tsv"
for file in $(cd "$api" && find . -name generated.proto | sed 's|^\./||' | sort); do
  dir=$(dirname "$file")
  mkdir -p "$out/k8s.io/api/$dir"
  strip "$api/$file" "$out/k8s.io/api/$file"
  group=$(grep -h 'GroupName *= *"' "$api/$dir/register.go" | head -1 | sed 's/.*"\(.*\)".*/\1/')
  printf 'k8s.io.api.%s\t%s\n' "$(echo "$dir" | tr / .)" "$group" >>"$out/groups.tsv"
done
for extra in $EXTRA; do
  IFS=: read -r module root dir <<<"$extra"
  mkdir -p "$out/k8s.io/$module/$dir"
  strip "$root/$dir/generated.proto" "$out/k8s.io/$module/$dir/generated.proto"
  group=$(grep -h 'GroupName *= *"' "$root/$dir/register.go" | head -1 | sed 's/.*"\(.*\)".*/\1/')
  printf 'k8s.io.%s.%s\t%s\n' "$(echo "$module" | tr - _)" "$(echo "$dir" | tr / .)" "$group" >>"$out/groups.tsv"
done
for dir in pkg/api/resource pkg/apis/meta/v1 pkg/runtime pkg/runtime/schema pkg/util/intstr; do
  mkdir -p "$out/k8s.io/apimachinery/$dir"
  strip "$machinery/$dir/generated.proto" "$out/k8s.io/apimachinery/$dir/generated.proto"
done
# Go named slices (`type ExtraValue []string`) travel as a message whose one field, `items`,
# holds the elements, and as a plain array in JSON: go-to-protobuf marks them
# `+protobuf.nullable=true`, a comment the descriptor set does not keep, so they are listed.
python3 - "$api" "$machinery" "$apiext" "$aggregator" >"$out/slices.tsv" <<'PY'
import os, re, sys
print("# message that is a Go slice: JSON has the array of its `items` (go-to-protobuf's +protobuf.nullable=true)")
found = []
for root in sys.argv[1:]:
    for dirpath, _, files in os.walk(root):
        if "generated.proto" not in files or "testdata" in dirpath or "testapigroup" in dirpath:
            continue
        text = open(os.path.join(dirpath, "generated.proto")).read()
        package = re.search(r"^package ([\w.]+);", text, re.M).group(1)
        for m in re.finditer(r"\+protobuf\.nullable=true\n(?://.*\n)*message (\w+) \{", text):
            found.append(package + "." + m.group(1))
for name in sorted(found):
    print(name)
PY
# What the Go structs' tags say that the .proto files do not: a field's JSON name where it
# differs (an inline struct, a field named after its Go name), and whether JSON leaves it out
# when zero (a value field tagged omitempty).
{
  echo "# proto message	proto field	JSON name (,inline: flattened; -: not in JSON)	omitempty: a Go value JSON leaves out when zero"
  (cd scripts/vendor-k8s-protos && go run fields.go k8s.io.api "$api" &&
    go run fields.go k8s.io.apiextensions_apiserver "$apiext" |
      grep -E '^k8s\.io\.apiextensions_apiserver\.pkg\.apis\.apiextensions\.v1\.[A-Z]' &&
    go run fields.go k8s.io.kube_aggregator "$aggregator" |
      grep -E '^k8s\.io\.kube_aggregator\.pkg\.apis\.apiregistration\.v1\.[A-Z]' &&
    go run fields.go k8s.io.apimachinery "$machinery" |
      grep -E '^k8s\.io\.apimachinery\.pkg\.(api\.resource|apis\.meta\.v1|runtime|runtime\.schema|util\.intstr)\.[A-Z]')
} >"$out/fields.tsv"
cat >"$out/PROVENANCE.md" <<MD
# Vendored Kubernetes protobuf schemas

- **What:** every \`generated.proto\` of \`k8s.io/api\` $API_VERSION; those of
  \`k8s.io/apiextensions-apiserver\` (\`pkg/apis/apiextensions/v1\`: CustomResourceDefinition)
  and \`k8s.io/kube-aggregator\` (\`pkg/apis/apiregistration/v1\`: APIService) at the same
  version; and those of \`k8s.io/apimachinery\` $MACHINERY_VERSION that they import
  (\`pkg/api/resource\`, \`pkg/apis/meta/v1\`, \`pkg/runtime\`, \`pkg/runtime/schema\`,
  \`pkg/util/intstr\`).
- **From:** the Go modules, by \`go mod download\` (\`scripts/vendor-k8s-protos.sh\`).
- **Licence:** Apache License 2.0, The Kubernetes Authors; the text is \`LICENSE\` here, and
  each file keeps its own header.
- **Changed:** comment lines are removed (the schemas are unchanged). \`groups.tsv\` is
  derived from each Go package's \`GroupName\`, and \`slices.tsv\` from the
  \`+protobuf.nullable=true\` comments (messages that are Go slices, arrays in JSON),
  and \`fields.tsv\` from the Go structs' tags (\`scripts/vendor-k8s-protos/fields.go\`:
  JSON names that differ from the protobuf ones, inline structs, and the value fields JSON
  leaves out when zero).
- **Used for:** \`k8s.binpb\`, the compiled descriptor set the core embeds to decode
  built-in types from protobuf into k8s-openapi's types.
MD
cp "$api/LICENSE" "$out/LICENSE"
for module in "$apiext" "$aggregator" "$machinery"; do
  cmp -s "$api/LICENSE" "$module/LICENSE" || { echo "$module has another licence" >&2; exit 1; }
done
du -sh "$out"
